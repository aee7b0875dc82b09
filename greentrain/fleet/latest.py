"""Latest starts: each job as late as the others allow, packed backwards from the deadlines.

The rolling form counts later capacity in GPU-hours, so it can plan two jobs
that together fit an hour's GPU-hours but not its GPUs side by side; acting
on such a plan can leave too little time for a deadline. This packing is the
check against that: jobs are placed, latest deadline first, each in the
latest stretch of whole GPUs free before its deadline. A job whose latest
start falls before the next decision must start now. The packing is greedy
(a sufficient check, not an exact one): a job it finds no place for before
its deadline is at risk and must start now too (if it can still finish alone).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from greentrain.fleet.model import JobStatus

__all__ = ["latest_starts"]

_STEP_H = 0.05
"""Time step of the packing (3 minutes): run times round up, deadlines down, to it."""
_MAX_STEPS = 40_000
"""A bound on the packed span; past it the step grows so the work stays linear in jobs."""


def latest_starts(statuses: Sequence[JobStatus], *, now_h: float, capacity: Mapping[str, int],
                  resume_overhead_h: float) -> dict[str, float | None]:
    """Job id -> the latest start (plan hours) that leaves every other job's deadline reachable.

    Each job runs at its current option (or its nominal one) for ``needed_h``, overhead included.
    A job with no room left before its deadline gets None (it is at risk); jobs already past reaching
    their deadline alone are left out (the plan runs them as soon as it can).
    """
    out: dict[str, float | None] = {}
    for part, gpus_total in capacity.items():
        jobs = [st for st in statuses if st.partition == part]
        if not jobs:
            continue
        span_h = max(st.deadline_h for st in jobs) - now_h
        step_h = max(_STEP_H, span_h / _MAX_STEPS)
        free = np.full(max(1, math.ceil(span_h / step_h)), gpus_total, dtype=np.int64)
        for st in sorted(jobs, key=lambda s: (-s.deadline_h, s.job_id)):
            option = st.local_option
            steps = max(1, math.ceil(st.needed_h(option, resume_overhead_h) / step_h - 1e-9))
            end = math.floor((st.deadline_h - now_h) / step_h + 1e-9)
            start = _latest_fit(free, st.options[option].gpus, steps, min(end, free.size))
            if start is None:  # no room left before its deadline: at risk, so it must start now
                if st.deadline_h >= now_h + st.needed_h(option, resume_overhead_h):
                    out[st.job_id] = None
                continue
            free[start:start + steps] -= st.options[option].gpus
            out[st.job_id] = now_h + start * step_h
    return out


def _latest_fit(free: np.ndarray, gpus: int, steps: int, end: int) -> int | None:
    """The latest index ``s`` with ``s + steps <= end`` and ``free[s:s + steps] >= gpus`` throughout."""
    if steps > end:
        return None
    short = np.concatenate([[0], np.cumsum(free[:end] < gpus)])
    ends = np.arange(steps, end + 1)
    fits = np.flatnonzero(short[ends] - short[ends - steps] == 0)
    return int(ends[fits[-1]] - steps) if fits.size else None
