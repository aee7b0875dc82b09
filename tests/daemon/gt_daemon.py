"""The daemon under test: two file-backed GPUs served on a real Unix socket, and the small tools the daemon
tests share (a forked client under another user, waiting for a condition)."""

from __future__ import annotations

import grp
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from greentrain.daemon.config import DaemonConfig
from greentrain.daemon.server import DaemonServer
from greentrain.testing import FileBackedGPU

NOBODY = 65534
NOBODY_GROUP = grp.getgrgid(NOBODY).gr_name  # 'nogroup' on Debian, 'nobody' elsewhere
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching the client to another user needs root")


def make_gpus(tmp_path: Path, privileged: bool = True) -> list[FileBackedGPU]:
    """Two A40-profiled GPUs whose settings live in files under ``tmp_path``."""
    return [FileBackedGPU(tmp_path / f"gpu{i}.json", "a40", index=i, privileged=privileged) for i in range(2)]


def serve(tmp_path: Path, sockdir: Path, **config: object) -> tuple[DaemonServer, list[FileBackedGPU]]:
    """A started daemon over ``make_gpus``, its socket in ``sockdir``."""
    gpus = make_gpus(tmp_path)
    cfg = DaemonConfig(socket=sockdir / "d.sock", state_dir=tmp_path / "state", **config)  # type: ignore[arg-type]
    server = DaemonServer(gpus, cfg)
    server.start()
    return server, gpus


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Whether ``predicate`` became true within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def fork_child(child: Callable[[int], None]) -> tuple[int, int]:
    """Run ``child(write_fd)`` in a forked process (it may switch user); returns (pid, read_fd)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: no pytest machinery, just the job, then _exit
        os.close(read_fd)
        code = 0
        try:
            child(write_fd)
        except BaseException as e:  # report, never unwind into pytest
            os.write(write_fd, f"error {type(e).__name__}: {e}\n".encode())
            code = 1
        os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def read_line(fd: int) -> str:
    """One line the child wrote."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()
