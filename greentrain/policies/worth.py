"""Whether a planned wait is worth it: no waiting for nothing.

A policy plans a delay or a pause from a forecast. The engine (and the
simulator, the same code) then asks three questions before it waits:

1. Is the signal constant (a static provider, a fallback to a constant, or no
   forecast at all)? Then waiting cannot save anything: run now.
2. Does the plan the wait belongs to save more than ``min_saving_frac`` of the
   job's expected emissions (its remaining energy at the mean intensity up to
   the deadline) against running now?
3. Does it save more than the forecast's own error at the horizon it relies
   on (the measured mean absolute error at the resume's horizon, times the
   energy the wait moves)?

Ties go to running now. Pure functions of their arguments.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, Snapshot
from greentrain.policies.planner import J_PER_KWH

__all__ = ["DEFAULT_MIN_SAVING_FRAC", "constant_signal", "expected_job_g", "keep_latest_start", "worth_waiting"]

DEFAULT_MIN_SAVING_FRAC = 0.005
"""A wait must save more than this fraction of the job's expected emissions."""

_SAME = 1e-9


def constant_signal(snapshot: Snapshot) -> bool:
    """The signal says nothing about time: no forecast, or every value equal to the current one."""
    if snapshot.carbon_now is None:
        return True
    now_g = snapshot.carbon_now.intensity_g_per_kwh
    return all(abs(p.intensity_g_per_kwh - now_g) <= _SAME * max(1.0, now_g) for p in snapshot.forecast)


def expected_job_g(snapshot: Snapshot) -> float:
    """The remaining job's expected emissions: power × remaining time × mean known intensity, grams."""
    values = [p.intensity_g_per_kwh for p in snapshot.forecast]
    if snapshot.carbon_now is not None:
        values.append(snapshot.carbon_now.intensity_g_per_kwh)
    if not values or not snapshot.power_w:
        return 0.0
    return snapshot.power_w * max(0.0, snapshot.work_remaining_s) * sum(values) / len(values) / J_PER_KWH


def _forecast_error_g(snapshot: Snapshot, decision: Decision, now: datetime) -> float:
    """The forecast's error over the energy the wait moves: MAE at the resume's horizon × that energy."""
    errors = snapshot.forecast_error_g_per_kwh
    if not errors or decision.until is None or not snapshot.power_w:
        return 0.0
    wait_s = max(0.0, (decision.until - now).total_seconds())
    starts = [start for start, _end in decision.plan if start > now]
    resume_s = max(wait_s, ((min(starts) - now).total_seconds() if starts else wait_s))
    horizon = min(len(errors) - 1, max(0, int(resume_s // 3600)))
    return errors[horizon] * snapshot.power_w * wait_s / J_PER_KWH


def worth_waiting(decision: Decision, snapshot: Snapshot, now: datetime,
                  min_saving_frac: float = DEFAULT_MIN_SAVING_FRAC) -> Decision:
    """``decision``, or RUN (with the reason) when its wait is for nothing or too little to trust."""
    if decision.action not in (Action.PAUSE, Action.DELAY_START):
        return decision
    if constant_signal(snapshot):
        return _run(decision, "constant carbon signal (static, fallback or no forecast): waiting cannot save "
                              "anything; running now")
    # What the wait buys. A delayed start: the whole plan's saving against running now (nothing is lost by
    # waiting an interval, and the plan re-plans each one). A job under way: this wait's own saving over
    # running the interval, which a forecast that always sees the next hour a little cleaner would otherwise
    # spend hour after hour until the deadline guard forces the run into the worst hours.
    fresh = snapshot.state == JobState.WAITING
    saving_g = decision.plan_saving_g if fresh and decision.plan_saving_g is not None else decision.saving_g
    if saving_g is None:
        return decision  # the policy does not say what it expects: its own judgement stands
    floor_g = min_saving_frac * expected_job_g(snapshot)
    error_g = _forecast_error_g(snapshot, decision, now)
    if saving_g <= floor_g:
        return _run(decision, f"waiting would save {saving_g:.3g} g, not more than "
                              f"{min_saving_frac:.0%} of the job's expected {expected_job_g(snapshot):.3g} g; "
                              "running now")
    if saving_g <= error_g:
        return _run(decision, f"waiting would save {saving_g:.3g} g, within the forecast's own error "
                              f"({error_g:.3g} g at that horizon); running now")
    return decision


def _run(decision: Decision, reason: str) -> Decision:
    return replace(decision, action=Action.RUN, until=None, plan=(), saving_g=None, plan_saving_g=None,
                   reason=reason)


def keep_latest_start(decision: Decision, now: datetime, latest: datetime | None, step_s: float) -> Decision:
    """A wait may not run past ``latest`` (the latest (re)start that meets the deadline at the pessimistic
    rate): moved up to it, or RUN when even ``step_s`` more of waiting would cross it. The simulator's form
    of the engine's deadline guard (``engine/guard.py``), which adds the engine's own state."""
    if decision.action not in (Action.PAUSE, Action.DELAY_START) or latest is None:
        return decision
    if now + timedelta(seconds=max(0.0, step_s)) > latest:
        return _run(decision, "deadline guard: must run to finish by the deadline at the pessimistic rate")
    if decision.until is not None and decision.until > latest:
        return replace(decision, until=latest)
    return decision
