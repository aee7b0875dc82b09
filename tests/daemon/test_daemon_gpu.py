"""The daemon route is a GPU: reads stay local, setters go through ``greentrain daemon``, reset restores."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from greentrain.daemon.config import DaemonConfig
from greentrain.daemon.gpu import DaemonBackend, DaemonGPU
from greentrain.daemon.server import DaemonServer
from greentrain.device.discovery import privileged_route
from greentrain.errors import PrivilegeError
from greentrain.testing import FileBackedGPU

pytestmark = pytest.mark.timeout(30)


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[Path, list[FileBackedGPU]]]:
    sockdir = Path(tempfile.mkdtemp(prefix="gt-dgpu-"))  # short path: AF_UNIX names are ~100 bytes at most
    gpus = [FileBackedGPU(tmp_path / f"gpu{i}.json", "a40", index=i) for i in range(2)]
    server = DaemonServer(gpus, DaemonConfig(socket=sockdir / "d.sock", state_dir=tmp_path / "state"))
    server.start()
    try:
        yield sockdir / "d.sock", gpus
    finally:
        server.shutdown()
        shutil.rmtree(sockdir, ignore_errors=True)


def test_the_registered_route_is_the_daemon_backend(tmp_path: Path) -> None:
    route = privileged_route(tmp_path / "d.sock", job="train")
    assert isinstance(route, DaemonBackend) and route.discover(None, []) == []
    assert route.managed() is None  # no socket there: no daemon, nothing connected to


def test_setters_go_through_the_daemon_and_reset_restores(tmp_path: Path,
                                                          served: tuple[Path, list[FileBackedGPU]]) -> None:
    socket_path, served_gpus = served
    # The job's own view of GPU 0: the same settings file, but this process may not write it.
    mine = FileBackedGPU(tmp_path / "gpu0.json", "a40", index=0, privileged=False)
    with pytest.raises(PrivilegeError):
        mine.set_power_limit_w(200.0)
    route = DaemonBackend(socket_path, job="train-a")
    gpu = route.wrap(mine)
    assert isinstance(gpu, DaemonGPU) and (gpu.uuid, gpu.index, gpu.name) == (mine.uuid, 0, mine.name)
    assert route.managed() == ({g.uuid for g in served_gpus}, str(socket_path))
    gpu.set_power_limit_w(200.0)
    assert gpu.power_limit_w() == 200.0 == served_gpus[0].power_limit_w()  # read locally, set by the daemon
    gpu.lock_sm_clocks_mhz(900, 1200)
    assert served_gpus[0].locked_sm_clocks_mhz() == (900, 1200)
    gpu.reset_sm_clocks()
    assert served_gpus[0].locked_sm_clocks_mhz() is None and served_gpus[0].power_limit_w() == 200.0
    route.reset()
    assert served_gpus[0].is_default()
    gpu.set_power_limit_w(250.0)
    route.close()  # the daemon restores what a closed connection held
    assert _eventually(served_gpus[0].is_default)


def _eventually(predicate, timeout_s: float = 5.0) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False
