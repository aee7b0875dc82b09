"""Deciding at a step boundary: the policy, behind the engine's deadline guard and budget.

Rank 0 only. ``Decider`` builds the ``Snapshot`` from what the engine measured,
asks the policy (degrading to run-now on a missing signal or a policy fault),
then lets the deadline guard clamp the decision (a pause may not run past the
latest safe resume) and the budget have the last word. It owns its own
bookkeeping: when the next decision is due, and the carbon data the last one
saw (a periodic re-plan on the same data is skipped).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from greentrain.engine.scaling import adopt_replicas
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, Snapshot
from greentrain.policies.power import CompositePolicy
from greentrain.policies.worth import DEFAULT_MIN_SAVING_FRAC, worth_waiting
from greentrain.signals.forecast.liveskill import ForecastSkill

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["RUN", "Decider", "planned_resume"]


RUN = Decision(action=Action.RUN, reason="")
"""The decision between re-plans: keep running, change nothing."""

UNSETTLED = "work remaining unknown (step time not measured yet): running now"
"""Why a job with steps runs before its rate settles (``StepTimes.settled``): no plan from the first steps."""


def _run(reason: str) -> Decision:
    return Decision(action=Action.RUN, reason=reason) if reason else RUN


class Decider:
    """Rank 0's decisions; ``interval_s`` is the longest time between two of them (job-clock seconds)."""

    def __init__(self, interval_s: float = 300.0, *, min_wait_saving: float = DEFAULT_MIN_SAVING_FRAC) -> None:
        self.interval_s = float(interval_s)
        self.min_wait_saving = float(min_wait_saving)
        """A wait must save more than this fraction of the job's expected emissions (``policies/worth.py``)."""
        self.skill = ForecastSkill()
        """The forecast's measured error by hours ahead: its bias (taken out of the plan) and spread."""
        self.last: Decision = RUN
        """The last decision made (re-plans during a wait included): what the terminal reports."""
        self.next_at: datetime | None = None
        """When the next decision is due (None: at the next step)."""
        self.decided_on: tuple[object, ...] = ()
        """Fingerprint of the carbon data behind the last decision."""

    def due_again(self) -> None:
        """Decide at the next step (new operating points, or the job resumed)."""
        self.next_at = None

    def check_start(self, engine: EngineCore, now: datetime) -> str | None:
        """The deadline's one feasibility check (``begin``): the error refusing the job, or None."""
        error, note = engine.deadline.check_start(now, engine.progress.work_remaining_s())
        if note is not None:
            engine.note(note)
        return error

    def maybe_decide(self, engine: EngineCore, now: datetime) -> Decision:
        """At a step boundary: decide when due (or when a budget is spent: stop at the right step)."""
        if engine.budget.stopping(engine):
            return self.decide(engine, now, JobState.RUNNING)
        if self.next_at is not None and now < self.next_at and engine.progress.steps_done > 1:
            return RUN
        return self.decide(engine, now, JobState.RUNNING)

    def decide(self, engine: EngineCore, now: datetime, state: JobState) -> Decision:
        """Ask the policy (or degrade), then the deadline guard and the budget."""
        self.next_at = now + timedelta(seconds=self.interval_s)
        progress = engine.progress
        carbon_now = engine.signals.latest(now, engine.ledger)  # always: steps are priced with it
        if state != JobState.WAITING:  # before the first step check_start speaks (error or best-effort note)
            _watch_deadline(engine, now)
        if progress.finished:
            return RUN
        if engine.deadline.best_effort:
            return _run("best-effort: deadline cannot be met, running now")
        work_s = progress.work_remaining_s()
        if work_s is None:
            if progress.steps_total is None:
                return _power_only(engine, now, "work remaining unknown (no steps_total / --estimate-hours): "
                                                "running now")
            return _power_only(engine, now, UNSETTLED)
        if carbon_now is None:
            return _power_only(engine, now, "no carbon signal: running now")
        forecast = engine.signals.forecast(now, engine.ledger)
        self.skill.observe(carbon_now)
        self.skill.record(now, forecast)
        power_w, power_source = engine.plan_power_w()
        snapshot = Snapshot(
            steps_done=progress.steps_done, steps_total=progress.steps_total, work_remaining_s=work_s,
            work_remaining_upper_s=(progress.work_remaining_s(pessimistic=True)
                                    if progress.steps_total or progress.work_total_s else None),
            step_time_s=progress.times.mean_s, step_time_std_s=progress.times.std_s, power_w=power_w,
            carbon_now=carbon_now, forecast=forecast, deadline=engine.deadline.at,
            resume_overhead_s=engine.deadline.resume_overhead_s, state=state, started_at=progress.first_start,
            current_power_limit_w=engine.io.job_stats.power_limit_w, precision=engine.io.job_stats.precision,
            operating_points=engine.operating_points, waiting_power_w=engine.pause_cost.value_w,
            forecast_error_g_per_kwh=self.skill.errors_g_per_kwh(),
            forecast_bias_g_per_kwh=self.skill.bias_g_per_kwh(),
        )
        if engine.scaling is not None:  # an elastic job: the policy also plans its replica count
            snapshot = engine.scaling.plan_with(snapshot)
        self.decided_on = engine.signals.fingerprint()
        progress.times.rate.planned()
        try:
            decision = engine.policy.decide(snapshot, now)
        except Exception as e:  # a policy bug must not stop training
            engine.note(f"policy {type(engine.policy).__name__} failed ({type(e).__name__}: {e}); running now")
            decision = _run("policy error: running now")
        decision = worth_waiting(decision, snapshot, now, self.min_wait_saving)  # no waiting for nothing
        decision = engine.budget.shift(engine, decision, snapshot, now)  # on_budget="shift": net-optimal pauses
        decision = self._unless_unsettled(engine, decision, now)
        decision = engine.deadline.clamp(decision, now, progress, self.interval_s)
        if decision.action == Action.RUN and decision.until is not None and decision.until > now:
            self.next_at = min(self.next_at, decision.until)  # the policy's own next look
        if decision.action in (Action.PAUSE, Action.DELAY_START) and decision.saving_g is not None:
            decision = replace(decision, reason=f"{decision.reason}; grams at {power_source}")
        decision = engine.budget.check(engine, decision, snapshot, now)  # a spent budget wins
        self.last = decision
        return decision

    def _unless_unsettled(self, engine: EngineCore, decision: Decision, now: datetime) -> Decision:
        """No wait planned from a rate that has not settled (``StepTimes.settled``): the first steps, or one
        evaluation step among them, would make one run pause at step 5 and an identical one never. A wait
        with a plan or a saving was priced with that rate: run, and plan at the step the rate settles; so
        is a 'running flat out' (it would hold the deadline guard engaged for the rest of the job). A
        policy's own wait that is not planned from the rate (no plan, no saving: a pause at a step it
        chose) stands."""
        progress = engine.progress
        if progress.steps_total is None or progress.times.settled:
            return decision
        if decision.action == Action.RUN and decision.to_the_end:  # 'the deadline cannot be met' from step 0
            self.next_at = None
            return replace(decision, to_the_end=False, reason=UNSETTLED)  # would engage the guard for good
        if decision.action not in (Action.PAUSE, Action.DELAY_START):
            return decision
        if not decision.plan and decision.saving_g is None:
            return decision
        self.next_at = None  # plan again at the next step: the rate may have settled
        return _run(UNSETTLED)

    def replan_paused(self, engine: EngineCore, now: datetime, force: bool = True) -> datetime | None:
        """Leader, during a wait: re-decide with fresh signals; the new resume time (``now`` = run now).

        Without ``force`` (a periodic tick) the policy is asked only if the carbon data changed since the
        last decision: re-deciding on identical inputs can only add noise. None = keep the current plan.
        """
        progress = engine.progress
        if engine.deadline.best_effort or progress.finished:
            return now
        if progress.rate_probe is not None:  # nothing is measured while waiting: the probe says how fast now
            progress.note_probe(engine.guarded("rate_probe", progress.rate_probe))
        state = JobState.WAITING if progress.first_start is None else JobState.PAUSED
        engine.signals.invalidate()
        if not force:
            engine.signals.latest(now, engine.ledger)
            engine.signals.forecast(now, engine.ledger)
            if engine.signals.fingerprint() == self.decided_on:
                return None
        decision = self.decide(engine, now, state)
        if decision.action == Action.RUN:
            if engine.io.broadcast.world_size == 1:  # one process: the count to resume at is ours to ask for now
                adopt_replicas(engine, decision, now)
            return now
        return decision.until


def _watch_deadline(engine: EngineCore, now: datetime) -> None:
    """Leader: warn once (stderr, event log) when the measured rate says the deadline will be missed; a job with
    steps only from its stable measured rate (the recent median after a warm-up, ``StepTimes.measured``)."""
    progress, watch = engine.progress, engine.deadline.watch
    step_s = progress.times.mean_s if progress.steps_total is not None else None  # `run` polls; it has no steps
    work_s = progress.work_remaining_s()
    if progress.steps_total is not None and not progress.times.measured:
        work_s = None  # no projection from the first steps or an evaluation step: the measured rate must settle
    message = watch.check(now, work_s, step_time_s=step_s)
    if message is not None:
        engine.event("deadline_risk_withdrawn" if watch.withdrawn else "deadline_risk", message=message,
                     deadline=engine.deadline.at, projected_finish=watch.projected_finish)


def _power_only(engine: EngineCore, now: datetime, reason: str) -> Decision:
    """Timing cannot be planned, but a measured profile lets a power policy still pick its operating point."""
    if not engine.operating_points:
        return _run(reason)
    # a composite's power half needs no carbon data
    policy = engine.policy.power if isinstance(engine.policy, CompositePolicy) else engine.policy
    if policy.power_use == "none":
        return _run(reason)
    progress = engine.progress
    snapshot = Snapshot(
        steps_done=progress.steps_done, steps_total=progress.steps_total, work_remaining_s=0.0,
        step_time_s=progress.times.mean_s, step_time_std_s=progress.times.std_s, power_w=engine.power_w(),
        deadline=engine.deadline.at, state=JobState.RUNNING, started_at=progress.first_start,
        current_power_limit_w=engine.io.job_stats.power_limit_w, precision=engine.io.job_stats.precision,
        operating_points=engine.operating_points,
    )
    try:
        chosen = policy.decide(snapshot, now)
    except Exception as e:  # a policy bug must not stop training
        engine.note(f"policy {type(policy).__name__} failed ({type(e).__name__}: {e}); power unchanged")
        return _run(reason)
    return Decision(action=Action.RUN, power_limit_w=chosen.power_limit_w, sm_clocks_mhz=chosen.sm_clocks_mhz,
                    reason=f"{reason}; {chosen.reason}" if chosen.reason else reason)


def planned_resume(decision: Decision, now: datetime) -> datetime | None:
    """When a pause is planned to end: the plan's first running interval after ``now``, else ``until``.

    A per-interval policy's ``until`` is only its next look (the interval's end); people want the resume."""
    starts = [start for start, _end in decision.plan if start > now]
    return min(starts) if starts else decision.until
