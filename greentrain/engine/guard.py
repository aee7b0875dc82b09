"""The deadline guard: the engine's own guarantee, independent of the policy.

A policy plans pauses from the measured step time; if steps then run slower
than planned, the plan slips. The guard recomputes, from a pessimistic step
time, the latest moment the job can (re)start and still finish by the
deadline, and the engine never waits past it. Pure functions of their
arguments, so they are tested without clocks.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from greentrain.errors import DeadlineError
from greentrain.units import format_duration_s, format_time

__all__ = ["SAFETY_FRAC", "latest_safe_resume", "must_run_now", "check_deadline"]

SAFETY_FRAC = 0.05
"""Extra fraction of remaining work kept in hand against slow-downs the statistics have not seen yet."""


def latest_safe_resume(
    deadline: datetime,
    work_remaining_s: float,
    *,
    resume_overhead_s: float = 0.0,
    margin_s: float = 0.0,
    safety_frac: float = SAFETY_FRAC,
) -> datetime:
    """Latest (re)start time that still finishes ``work_remaining_s`` (pessimistic) before ``deadline``."""
    needed_s = max(0.0, work_remaining_s) * (1.0 + safety_frac) + max(0.0, resume_overhead_s) + max(0.0, margin_s)
    return deadline - timedelta(seconds=needed_s)


def must_run_now(now: datetime, latest_resume: datetime, next_step_s: float) -> bool:
    """Whether pausing now, even for one step's length, would cross the latest safe resume."""
    return now + timedelta(seconds=max(0.0, next_step_s)) >= latest_resume


def check_deadline(deadline: datetime, now: datetime, work_remaining_s: float | None) -> None:
    """Refuse a deadline in the past or shorter than the remaining work (DeadlineError names both)."""
    if deadline <= now:
        raise DeadlineError(
            f"deadline {format_time(deadline)} is in the past (by "
            f"{format_duration_s((now - deadline).total_seconds())}); give a later --deadline"
        )
    if work_remaining_s is None:
        return
    available_s = (deadline - now).total_seconds()
    if work_remaining_s > available_s:
        raise DeadlineError(
            f"deadline {format_time(deadline)} leaves {format_duration_s(available_s)} but the remaining work "
            f"needs {format_duration_s(work_remaining_s)}; give a later --deadline or use --deadline-policy "
            "best-effort"
        )
