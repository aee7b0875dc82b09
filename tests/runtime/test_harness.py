"""Ranks start from a forkserver, never by forking the test process (CUDA builds refuse autograd after fork)."""

from __future__ import annotations

import re
from pathlib import Path

from .harness import rank_context, run_ranks

_FORK = re.compile(r"""get_context\(\s*["']fork["']\s*\)|set_start_method\(\s*["']fork["']""")


def _pid(rank: int, world: int) -> int:
    import os

    return os.getppid()


def test_rank_helpers_use_a_forkserver() -> None:
    import os

    assert rank_context().get_start_method() == "forkserver"
    parents = run_ranks(_pid, 2, timeout_s=60)
    assert os.getpid() not in parents, "ranks must be children of the forkserver, not of the test process"


def test_no_test_starts_processes_by_fork() -> None:
    tests = Path(__file__).resolve().parents[1]
    offenders = [str(p.relative_to(tests)) for p in tests.rglob("*.py") if _FORK.search(p.read_text("utf-8"))]
    assert offenders == [], f"multiprocessing with the fork start method in {offenders}"
