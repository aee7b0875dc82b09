"""Whether a planned wait is worth it: no waiting for nothing, and none for less than it is expected to save.

A policy plans a delay or a pause from a forecast. The engine (and the
simulator, the same code) then asks two questions before it waits:

1. Is the signal constant (a static provider, a fallback to a constant, or no
   forecast at all)? Then waiting cannot save anything: run now.
2. Does the wait save more than ``min_saving_frac`` of the job's expected
   emissions (its remaining energy at the mean intensity up to the deadline),
   *in expectation*? A delayed start counts the whole plan's saving against
   running now, a job under way this wait's own saving.

The expectation is over the forecast's measured error. Its bias by hours ahead
(``Snapshot.forecast_bias_g_per_kwh``) is taken out before planning
(``policies/calibrate.py``), so the saving a calibrated policy reports is
already the expected one; what is left of the error is noise around it, and
noise that is as likely either way does not shrink an expected saving. With
that error (the median absolute error at the resume's horizon, read as a normal
spread) the gate states the chance that waiting beats running now,
Φ(saving / (spread × energy moved)): over one half exactly when the expected
saving is positive. It is reported in the reason, not used as a margin (until
issue 41 a wait had to save more than that error times the energy moved,
which refused waits worth taking: docs/benchmarks.md).

Ties go to running now. Pure functions of their arguments.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta

from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, Snapshot
from greentrain.policies.calibrate import calibrated
from greentrain.policies.slot_planner import J_PER_KWH

__all__ = ["DEFAULT_MIN_SAVING_FRAC", "constant_signal", "expected_job_g", "keep_latest_start", "win_probability",
           "worth_waiting"]

DEFAULT_MIN_SAVING_FRAC = 0.005
"""A wait must save more than this fraction of the job's expected emissions."""

_SAME = 1e-9
_MAD_TO_SIGMA = 1.4826
"""A normal error's standard deviation per unit of its median absolute deviation."""


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


def _spread_g(snapshot: Snapshot, decision: Decision, now: datetime) -> float:
    """The spread of the wait's saving: the forecast's error at the resume's horizon (as a normal standard
    deviation) × the energy the wait moves there; 0 when nothing is measured."""
    errors = snapshot.forecast_error_g_per_kwh
    if not errors or decision.until is None or not snapshot.power_w:
        return 0.0
    wait_s = max(0.0, (decision.until - now).total_seconds())
    starts = [start for start, _end in decision.plan if start > now]
    resume_s = max(wait_s, ((min(starts) - now).total_seconds() if starts else wait_s))
    horizon = min(len(errors) - 1, max(0, int(resume_s // 3600)))
    return _MAD_TO_SIGMA * errors[horizon] * snapshot.power_w * wait_s / J_PER_KWH


def win_probability(saving_g: float, spread_g: float) -> float:
    """The chance that a wait expected to save ``saving_g`` (bias taken out) beats running now, its error a
    normal of standard deviation ``spread_g``: 1 or 0 when the error is nil."""
    if spread_g <= 0:
        return 1.0 if saving_g > 0 else 0.0
    return 0.5 * (1.0 + math.erf(saving_g / (spread_g * math.sqrt(2.0))))


def worth_waiting(decision: Decision, snapshot: Snapshot, now: datetime,
                  min_saving_frac: float = DEFAULT_MIN_SAVING_FRAC) -> Decision:
    """``decision``, or RUN (with the reason) when its wait is for nothing or expected to save too little."""
    if decision.action not in (Action.PAUSE, Action.DELAY_START):
        return decision
    if constant_signal(snapshot):
        return _run(decision, "constant carbon signal (static, fallback or no forecast): waiting cannot save "
                              "anything; running now")
    # What the wait buys. A delayed start: the whole plan's saving against running now (nothing is lost by
    # waiting an interval, and the plan re-plans each one). A job under way: this wait's own saving over
    # running the interval, which a forecast that always sees the next hour a little cleaner would otherwise
    # spend hour after hour until the deadline guard forces the run into the worst hours (the bias taken
    # out by the policy answers a measured one; the floor the rest). Weighing the whole plan here as well was
    # measured and not kept: 8 h / 24 h at idle 0 went from 0.825 to 0.811 (docs/benchmarks.md, issue 41).
    fresh = snapshot.state == JobState.WAITING
    saving_g = decision.plan_saving_g if fresh and decision.plan_saving_g is not None else decision.saving_g
    if saving_g is None:
        return decision  # the policy does not say what it expects: its own judgement stands
    expected_g = expected_job_g(calibrated(snapshot, now))
    floor_g = min_saving_frac * expected_g
    if saving_g <= floor_g:
        return _run(decision, f"waiting would save {saving_g:.3g} g, not more than "
                              f"{min_saving_frac:.0%} of the job's expected {expected_g:.3g} g; running now")
    chance = win_probability(saving_g, _spread_g(snapshot, decision, now))
    return replace(decision, reason=f"{decision.reason} (beats running now with p = {chance:.2f} under the "
                                    "forecast's measured error)" if snapshot.forecast_error_g_per_kwh
                   else decision.reason)


def _run(decision: Decision, reason: str) -> Decision:
    return replace(decision, action=Action.RUN, until=None, plan=(), saving_g=None, plan_saving_g=None,
                   reason=reason)


def keep_latest_start(decision: Decision, now: datetime, latest: datetime | None, step_s: float) -> Decision:
    """A wait may not run past ``latest`` (the latest (re)start that meets the deadline at the pessimistic
    rate): moved up to it, or RUN when even ``step_s`` more of waiting would cross it. The simulator's form
    of the engine's deadline guard (``engine/deadline_guard.py``), which adds the engine's own state."""
    if decision.action not in (Action.PAUSE, Action.DELAY_START) or latest is None:
        return decision
    if now + timedelta(seconds=max(0.0, step_s)) > latest:
        return _run(decision, "deadline guard: must run to finish by the deadline at the pessimistic rate")
    if decision.until is not None and decision.until > latest:
        return replace(decision, until=latest)
    return decision
