"""Replay a carbon trace through a policy, one trace interval at a time.

At the start of each interval the simulator builds the same ``Snapshot`` the
live engine would: the actual intensity of this interval, a forecast made by
the forecaster from the trace *up to and including this interval only*, the
remaining work, the deadline, the resume overhead and (with a GPU profile)
the measured operating points (or an elastic job's scaling profile, its
current replica count and the count its work is counted at). It calls ``policy.decide(snapshot, now)``,
the very function the engine calls, and charges the interval in the Ledger.
A PAUSE/DELAY_START is honoured until ``Decision.until``, as the engine does.

The job's rate is measured as the engine measures it: an interval's run is a
sample, and while the job waits a probe of the rate it would run at now (the
engine's ``rate_probe``) is one. Deadlines are planned and guarded with the
room their spread asks for (``RateEstimator.spread_room_s``: none for a steady
job). The forecast's error is scored as the run goes, as the engine scores it
(``signals/forecast/liveskill.py``; ``calibrate_days`` also scores the forecaster's
record before the start), and its bias by hours ahead goes to the policy
(``Snapshot.forecast_bias_g_per_kwh``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Policy, Snapshot
from greentrain.policies.slot_planner import Mode, StartState
from greentrain.policies.rate import RateEstimator
from greentrain.policies.worth import DEFAULT_MIN_SAVING_FRAC, keep_latest_start, worth_waiting
from greentrain.signals.base import IntensityPoint
from greentrain.signals.forecast.deviation import DeviationTally
from greentrain.signals.forecast.liveskill import ForecastSkill
from greentrain.sim.job import SimJob
from greentrain.sim.ledger import Ledger
from greentrain.sim.noise import RateProfile

__all__ = ["CALIBRATE_DAYS", "ForecasterLike", "TraceIndex", "simulate_run"]

CALIBRATE_DAYS = 0.0
"""Days of the forecaster's record before a simulated start scored to calibrate it (its bias by horizon).
Off by default: a week of record, every 6 h, took carbon-aware on 24 h / 72 h jobs with the trace-only
forecaster from 0.736 to 0.354 of the oracle's saving on DE-LU 2022 (docs/benchmarks.md, issue 41): a week's
mean error at 1-3 days ahead is that week's weather, not the forecaster's bias."""

_STATES = {StartState.FRESH: JobState.WAITING, StartState.RUNNING: JobState.RUNNING, StartState.PAUSED: JobState.PAUSED}


class ForecasterLike(Protocol):
    """What the simulator needs from a forecaster (``greentrain.signals.forecast.forecaster.Forecaster``).

    Optional class attribute ``horizon_independent = True``: the value for h
    hours ahead does not depend on ``horizon_h``, so ``simulate()`` may ask once
    per hour and share the forecast between starts (``greentrain.sim.fcache``).
    """

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        ...


class TraceIndex:
    """A trace with fast lookup of the interval starting at a given time."""

    def __init__(self, points: Sequence[IntensityPoint], name: str = "trace") -> None:
        if not points:
            raise ConfigError(f"{name}: trace has no points")
        self.points = list(points)
        self.name = name
        self._starts = [p.start for p in self.points]

    def index(self, when: datetime, what: str = "--start") -> int:
        """Index of the interval starting exactly at ``when``; ConfigError otherwise."""
        when = ensure_aware_utc(when, what)
        i = bisect_left(self._starts, when)
        if i == len(self._starts) or self._starts[i] != when:
            first, last = self._starts[0], self.points[-1].end
            if not first <= when < last:
                raise ConfigError(f"{what}: {_iso(when)} is outside {self.name} ({_iso(first)} to {_iso(last)})")
            raise ConfigError(f"{what}: {_iso(when)} is not the start of a trace interval (use whole hours)")
        return i

    def actual_at(self, when: datetime) -> float | None:
        """The intensity of the interval starting exactly at ``when``; None where the trace has none."""
        i = bisect_left(self._starts, when)
        return self.points[i].intensity_g_per_kwh if i < len(self._starts) and self._starts[i] == when else None

    def require_cover(self, start: datetime, until: datetime, what: str) -> None:
        """ConfigError unless the trace covers [start, until)."""
        if until > self.points[-1].end:
            raise ConfigError(
                f"--trace: {self.name} ends {_iso(self.points[-1].end)}, too short for {what} "
                f"({_iso(start)} + deadline = {_iso(until)})"
            )


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class RunTrace:
    """What happened in one simulated run (the policy's side)."""

    ledger: Ledger
    start: datetime
    deadline: datetime
    decisions: int
    forecast_deviation: DeviationTally
    """The forecasts the decisions used, scored against the trace (measured)."""


def rate_estimator(estimate_error: float = 0.0) -> RateEstimator:
    """The simulator's rate model: one sample per interval run (seconds per second of full-speed work).
    ``estimate_error``: until the rate is measured, waits keep room for the work taking this fraction longer
    than the estimate (``--estimate-error``)."""
    return RateEstimator(recent=3, history=48, min_samples=2, prior_s=1.0, prior_spread=estimate_error)


def simulate_run(trace: TraceIndex, start: datetime, job: SimJob, policy: Policy,
                 forecaster: ForecasterLike, rates: RateProfile | None = None, *,
                 min_wait_saving: float = DEFAULT_MIN_SAVING_FRAC, estimate_error: float = 0.0,
                 engine_gate: bool = True, wait_gate: bool = True,
                 calibrate_days: float = CALIBRATE_DAYS) -> RunTrace:
    """Run ``job`` from ``start`` under ``policy`` at the realised ``rates``; stops when done or at twice the
    deadline. The policy sees the rate only as a running job measures it (``policies/rate.py``), and its
    waits pass the engine's gate (``policies/worth.py``) and deadline guard; ``engine_gate=False`` replays the
    policy's decisions as they are (tests of the replay itself), ``wait_gate=False`` keeps the deadline guard
    but not the wait gate (what the gate costs, in the benchmarks). The forecast's error is measured as the
    run goes and, with ``calibrate_days``, on the forecaster's record over that many days before the start
    (``ForecastSkill.backfill``)."""
    first = trace.index(start)
    deadline = start + timedelta(seconds=job.deadline_s)
    give_up = start + timedelta(seconds=2 * max(job.deadline_s, job.work_s))
    ledger = Ledger(job, rates=rates, origin=start)
    estimator = rate_estimator(estimate_error)
    skill = ForecastSkill()  # the forecast's error so far, as the engine measures it
    if calibrate_days > 0:
        skill.backfill(forecaster, trace.points[:first], start, days=calibrate_days)
    mode = job.full
    wake: datetime | None = None
    paused = False
    started_at: datetime | None = None
    decisions = 0
    tally = DeviationTally()
    for t in range(first, len(trace.points)):
        point = trace.points[t]
        now = point.start
        if ledger.done or now >= give_up:
            break
        if wake is None or now >= wake:
            if paused or started_at is None:  # nothing runs to measure the rate: probe it
                _probe(estimator, rates, now - start)
            snapshot = _snapshot(trace, t, job, ledger, deadline, forecaster, mode, started_at, estimator, skill)
            decision = policy.decide(snapshot, now)
            tally.score(now, snapshot.forecast, trace.actual_at)
            if engine_gate:
                if wait_gate:
                    decision = worth_waiting(decision, snapshot, now, min_wait_saving)
                decision = keep_latest_start(decision, now, _latest_start(job, ledger, deadline, estimator),
                                             (point.end - point.start).total_seconds())
            decisions += 1
            paused = decision.action != Action.RUN
            wake = decision.until if paused else None
            if not paused:
                mode = job.mode_for(decision.power_limit_w, mode)
                if decision.replicas and job.scaling is not None:
                    mode = job.replica_mode(decision.replicas)
        if not paused and started_at is None:
            started_at = now
        ledger.step(point, None if paused else mode)
        if not paused:
            estimator.add(1.0 / ledger.last_rate)
    return RunTrace(ledger, start, deadline, decisions, tally)


def _probe(estimator: RateEstimator, rates: RateProfile | None, offset: timedelta) -> None:
    """A waiting job's rate probe (the engine's ``rate_probe``): the rate the machine would run it at now. It
    feeds the spread the deadline room is kept with; a steady rate adds none."""
    rate = rates.rate_at(offset.total_seconds()) if rates is not None else 1.0
    estimator.add(1.0 / rate)


def _latest_start(job: SimJob, ledger: Ledger, deadline: datetime, estimator: RateEstimator,
                  overhead_s: float | None = None) -> datetime:
    """The latest (re)start that finishes the rest by ``deadline`` at the pessimistic rate (a resume first, or
    ``overhead_s``: a migration's)."""
    need_s = ledger.remaining_s * (estimator.spread_room_s() or 1.0) / job.full.speed
    if ledger.state != StartState.FRESH:
        need_s += job.resume_overhead_s if overhead_s is None else overhead_s
    return deadline - timedelta(seconds=need_s)


def _snapshot(trace: TraceIndex, t: int, job: SimJob, ledger: Ledger, deadline: datetime,
              forecaster: ForecasterLike, mode: Mode, started_at: datetime | None, estimator: RateEstimator,
              skill: ForecastSkill, overhead_s: float | None = None) -> Snapshot:
    now = trace.points[t].start
    hours_left = math.ceil((deadline - now).total_seconds() / 3600.0 - 1e-9) - 1
    forecast = forecaster.forecast(trace.points[: t + 1], now, max(1, hours_left))
    skill.observe(trace.points[t])
    skill.record(now, forecast)
    return Snapshot(
        work_remaining_s=ledger.remaining_s * (estimator.robust_s or 1.0),
        work_remaining_upper_s=ledger.remaining_s * (estimator.spread_room_s() or 1.0),
        power_w=mode.power_w / (estimator.robust_s or 1.0),  # as measured: energy per second of running
        carbon_now=trace.points[t],
        forecast=tuple(forecast),
        deadline=deadline,
        resume_overhead_s=job.resume_overhead_s if overhead_s is None else overhead_s,
        state=_STATES[ledger.state],
        started_at=started_at,
        operating_points=job.operating_points,
        current_power_limit_w=mode.power_limit_w,
        waiting_power_w=job.waiting_power_w,
        forecast_error_g_per_kwh=skill.errors_g_per_kwh(),
        forecast_bias_g_per_kwh=skill.bias_g_per_kwh(),
        scaling=job.scaling,
        replicas=ledger.replicas,
        work_replicas=job.replicas,
        min_replicas=job.min_replicas,
        max_replicas=job.max_replicas,
    )
