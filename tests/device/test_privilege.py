"""The read-only privilege judgement: effective uid, CAP_SYS_ADMIN in CapEff, no write."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.daemon.gpu import daemon_gpus
from greentrain.device import privilege


def status_file(tmp_path: Path, cap_eff: str) -> Path:
    path = tmp_path / "status"
    path.write_text(f"Name:\tpython\nUid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapEff:\t{cap_eff}\n")
    return path


def test_cap_eff_is_parsed_as_hex(tmp_path: Path) -> None:
    assert privilege.effective_capabilities(status_file(tmp_path, "0000000000200000")) == 1 << 21
    assert privilege.effective_capabilities(tmp_path / "missing") is None
    assert privilege.effective_capabilities(status_file(tmp_path, "zz")) is None


@pytest.mark.parametrize(("euid", "cap_eff", "permitted", "basis"), [
    (0, "0000000000000000", True, "euid 0 (root)"),
    (1000, "0000000000200000", True, "CAP_SYS_ADMIN in the effective capability set"),
    (1000, "00000000001fffff", False, "euid 1000, no CAP_SYS_ADMIN"),  # every capability below bit 21
])
def test_local_privilege(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, euid: int, cap_eff: str,
                         permitted: bool, basis: str) -> None:
    monkeypatch.setattr(privilege.os, "geteuid", lambda: euid)
    judged = privilege.local_privilege(status_file(tmp_path, cap_eff))
    assert (judged.permitted, judged.basis, judged.verified) == (permitted, basis, False)


def test_no_daemon_socket_means_no_daemon(tmp_path: Path) -> None:
    assert daemon_gpus(tmp_path / "absent.sock") is None
    not_a_socket = tmp_path / "plain-file"
    not_a_socket.write_text("")
    assert daemon_gpus(not_a_socket, timeout_s=0.5) is None


def test_a_running_daemon_reports_the_gpus_it_manages(tmp_path: Path) -> None:
    import shutil
    import tempfile

    from greentrain.daemon.config import DaemonConfig
    from greentrain.daemon.server import DaemonServer
    from greentrain.testing import FileBackedGPU

    sockdir = Path(tempfile.mkdtemp(prefix="gt-priv-"))  # short path: AF_UNIX limits socket names to ~100 bytes
    gpus = [FileBackedGPU(tmp_path / f"gpu{i}.json", "a40", index=i) for i in range(2)]
    before = [g.power_limit_w() for g in gpus]
    server = DaemonServer(gpus, DaemonConfig(socket=sockdir / "d.sock", state_dir=tmp_path / "state"))
    server.start()
    try:
        found = daemon_gpus(sockdir / "d.sock")
        assert found is not None and found == ({g.uuid for g in gpus}, str(sockdir / "d.sock"))
        assert [g.power_limit_w() for g in gpus] == before  # asking the daemon's status changes nothing
    finally:
        server.shutdown()
        shutil.rmtree(sockdir, ignore_errors=True)
