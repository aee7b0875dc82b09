"""Helpers for tests that start servers or processes: a free local port, and gloo ranks from a forkserver."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
from collections.abc import Callable
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_ranks(target: Callable[..., None], world: int, *args: Any, timeout_s: float) -> dict[int, tuple]:
    """Run ``target(rank, *args, out)`` in ``world`` processes; what each rank put on ``out``, by rank.

    A rank reports a failure by putting ``(rank, "error", traceback_text)``, which fails the test
    with that traceback. Ranks start from a forkserver, not fork: a clean process, not a copy of this
    long-lived test process with whatever threads and locks (OpenMP, loggers, schedulers) it holds.
    """
    os.environ.update(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    ctx = mp.get_context("forkserver")
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(rank, *args, out), daemon=True) for rank in range(world)]
    for proc in procs:
        proc.start()
    results: dict[int, tuple] = {}
    try:
        for _ in range(world):
            item = out.get(timeout=timeout_s)
            assert item[1] != "error", item[2]
            results[item[0]] = item
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
    return results
