"""Deciding at a step boundary: the policy, behind the engine's deadline guard.

Rank 0 only. Builds the ``Snapshot`` from what the engine measured, asks the
policy (degrading to run-now on a missing signal or a policy fault), then
applies the guard: a pause may not run past the latest safe resume, a pause
the deadline cannot afford is refused, and once the guard has had to act the
job runs to the end. Functions of the engine (passed as the first argument) so the
engine module stays small.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from greentrain.errors import DeadlineError
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, Snapshot
from greentrain.engine.guard import check_deadline as _check
from greentrain.engine.guard import must_run_now
from greentrain.engine.scaling import adopt_replicas, snapshot_fields

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["RUN", "check_deadline", "maybe_decide", "decide", "guard", "replan_paused", "planned_resume"]


RUN = Decision(action=Action.RUN, reason="")
"""The decision between re-plans: keep running, change nothing."""


def _run(reason: str) -> Decision:
    return Decision(action=Action.RUN, reason=reason) if reason else RUN


def _iso(value: datetime | None) -> str:
    return value.isoformat().replace("+00:00", "Z") if value is not None else "-"


def check_deadline(engine: EngineCore, now: datetime) -> str | None:
    if engine.deadline is None:
        return None
    try:
        _check(engine.deadline, now, engine.work_remaining_s())
    except DeadlineError as e:
        if engine.deadline_policy != "best-effort":
            return str(e)
        engine.best_effort = True
        engine.deadline_watch.warned = True  # the note below is the warning; say it once
        problem = str(e).split("; give a later")[0]  # drop the fix: best-effort is the user's choice
        engine.note(f"{problem}; best-effort: running now")
    return None


def watch_deadline(engine: EngineCore, now: datetime) -> None:
    """Leader: warn once (stderr, event log) when the measured rate says the deadline will be missed."""
    step_s = engine.times.mean_s if engine.steps_total is not None else None  # `run` polls; it has no steps
    message = engine.deadline_watch.check(now, engine.work_remaining_s(), step_time_s=step_s)
    if message is not None:
        engine.event("deadline_risk", message=message, deadline=engine.deadline,
                      projected_finish=engine.deadline_watch.projected_finish)


def maybe_decide(engine: EngineCore, now: datetime) -> Decision:
    if engine.budget.stopping(engine):  # checked every step: stop at the right one
        return decide(engine, now, JobState.RUNNING)
    if engine.next_decide_at is not None and now < engine.next_decide_at and engine.steps_done > 1:
        return _run("")
    return decide(engine, now, JobState.RUNNING)


def decide(engine: EngineCore, now: datetime, state: JobState) -> Decision:
    """Leader only: ask the policy (or degrade) and apply the deadline guard."""
    engine.next_decide_at = now + timedelta(seconds=engine.decide_interval_s)
    carbon_now = engine.signals.latest(now, engine.ledger)  # always: steps are priced with it
    if state != JobState.WAITING:  # before the first step check_deadline speaks (error or best-effort note)
        watch_deadline(engine, now)
    if engine.finished:
        return _run("")
    if engine.best_effort:
        return _run("best-effort: deadline cannot be met, running now")
    work_s = engine.work_remaining_s()
    if work_s is None:
        if engine.steps_total is None:
            return _power_only(engine, now, "work remaining unknown (no steps_total / --estimate-hours): running now")
        return _power_only(engine, now, "work remaining unknown (step time not measured yet): running now")
    if carbon_now is None:
        return _power_only(engine, now, "no carbon signal: running now")
    snapshot = Snapshot(
        steps_done=engine.steps_done, steps_total=engine.steps_total, work_remaining_s=work_s,
        step_time_s=engine.times.mean_s, step_time_std_s=engine.times.std_s, power_w=engine.power_w(),
        carbon_now=carbon_now, forecast=engine.signals.forecast(now, engine.ledger), deadline=engine.deadline,
        resume_overhead_s=engine.resume_overhead_s, state=state, started_at=engine.first_start,
        current_power_limit_w=engine.job_stats.power_limit_w, precision=engine.job_stats.precision,
        operating_points=engine.operating_points, waiting_power_w=engine.waiting.value_w,
        **snapshot_fields(engine),
    )
    engine.decided_on = engine.signals.fingerprint()
    try:
        decision = engine.policy.decide(snapshot, now)
    except Exception as e:  # a policy bug must not stop training
        engine.note(f"policy {type(engine.policy).__name__} failed ({type(e).__name__}: {e}); running now")
        decision = _run("policy error: running now")
    decision = engine.budget.shift(engine, decision, snapshot, now)  # on_budget="shift": net-optimal pauses
    return engine.budget.check(engine, guard(engine, decision, now), snapshot, now)  # a spent budget wins


def _power_only(engine: EngineCore, now: datetime, reason: str) -> Decision:
    """Timing cannot be planned, but a measured profile lets a power policy still pick its operating point."""
    if not engine.operating_points:
        return _run(reason)
    policy = getattr(engine.policy, "power", engine.policy)  # a composite's power half needs no carbon data
    if policy.power_use == "none":
        return _run(reason)
    snapshot = Snapshot(
        steps_done=engine.steps_done, steps_total=engine.steps_total, work_remaining_s=0.0,
        step_time_s=engine.times.mean_s, step_time_std_s=engine.times.std_s, power_w=engine.power_w(),
        deadline=engine.deadline, state=JobState.RUNNING, started_at=engine.first_start,
        current_power_limit_w=engine.job_stats.power_limit_w, precision=engine.job_stats.precision,
        operating_points=engine.operating_points,
    )
    try:
        chosen = policy.decide(snapshot, now)
    except Exception as e:  # a policy bug must not stop training
        engine.note(f"policy {type(policy).__name__} failed ({type(e).__name__}: {e}); power unchanged")
        return _run(reason)
    return Decision(action=Action.RUN, power_limit_w=chosen.power_limit_w, sm_clocks_mhz=chosen.sm_clocks_mhz,
                    reason=f"{reason}; {chosen.reason}" if chosen.reason else reason)


def guard(engine: EngineCore, decision: Decision, now: datetime) -> Decision:
    """Clamp pauses to the latest safe resume; refuse a pause the deadline cannot afford."""
    if decision.action == Action.RUN:
        if decision.to_the_end and engine.deadline is not None:
            engine.guard_engaged = True  # 'no slack; running flat out' stays true: no pause after it
        if decision.until is not None and decision.until > now:
            engine.next_decide_at = min(engine.next_decide_at or decision.until, decision.until)
        return decision
    latest = engine.latest_safe_resume()
    until = decision.until or (now + timedelta(seconds=engine.decide_interval_s))
    if latest is not None:
        if engine.guard_engaged or must_run_now(now, latest, engine.times.pessimistic_s or 0.0):
            engine.guard_engaged = True
            return replace(decision, action=Action.RUN, until=None,
                           reason=f"deadline guard: must run to finish by {_iso(engine.deadline)}")
        if until > latest:
            until = latest
            decision = replace(decision, reason=f"{decision.reason} (resume moved up by the deadline guard)")
    return replace(decision, until=until)


def replan_paused(engine: EngineCore, now: datetime, force: bool = True) -> datetime | None:
    """Leader, during a wait: re-decide with fresh signals; the new resume time (``now`` = run now).

    Without ``force`` (a periodic tick) the policy is asked only if the carbon data changed since the
    last decision: re-deciding on identical inputs can only add noise. None = keep the current plan.
    """
    if engine.best_effort or engine.finished:
        return now
    _probe_rate(engine)
    state = JobState.WAITING if engine.first_start is None else JobState.PAUSED
    engine.signals.invalidate()
    if not force:
        engine.signals.latest(now, engine.ledger)
        engine.signals.forecast(now, engine.ledger)
        if engine.signals.fingerprint() == engine.decided_on:
            return None
    decision = decide(engine, now, state)
    if decision.action == Action.RUN:
        if engine.broadcast.world_size == 1:  # one process: the count to resume at is ours to ask for now
            adopt_replicas(engine, decision, now)
        return now
    return decision.until


def _probe_rate(engine: EngineCore) -> None:
    """While waiting nothing is measured: ask the job's probe (if any) how long a step takes now, so a
    machine that got busier moves the deadline guard's latest safe resume up before the wait ends."""
    probe = engine.rate_probe
    if probe is None:
        return
    step_s = engine.guarded("rate_probe", probe)
    if isinstance(step_s, (int, float)):
        engine.times.note_probe(float(step_s))


def planned_resume(decision: Decision, now: datetime) -> datetime | None:
    """When a pause is planned to end: the plan's first running interval after ``now``, else ``until``.

    A per-interval policy's ``until`` is only its next look (the interval's end); people want the resume."""
    starts = [start for start, _end in decision.plan if start > now]
    return min(starts) if starts else decision.until
