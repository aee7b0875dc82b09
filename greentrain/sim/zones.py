"""One job that may run in several grid zones, moving between them at its pauses.

The replay is ``replay.simulate_run``'s, hour by hour on the home zone's
(the first trace's) clock, with one addition: wherever the job stands still
(before its first start, or paused) ``sim/placement.py`` picks the zone it
would (re)start in, on each zone's own forecast. The policy then decides in
that zone's snapshot, whose resume overhead is the migration overhead when
the zone is not the one the job last ran in, and the deadline guard counts
that overhead too. A paused job's held hardware draws in the zone it last ran
in. Each run is compared with the same policy pinned to the home zone ("stay
home") and to the zone with the cleanest hour at the start ("greenest at
start"), and with each zone's perfect-foresight oracle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import greentrain.sim.baselines as baselines
from greentrain.policies.base import Action, Policy
from greentrain.policies.rate import RateEstimator
from greentrain.policies.slot_planner import StartState
from greentrain.policies.worth import DEFAULT_MIN_SAVING_FRAC, keep_latest_start, worth_waiting
from greentrain.signals.forecast.deviation import DeviationTally
from greentrain.signals.forecast.liveskill import ForecastSkill
from greentrain.sim.fcache import shared_per_hour
from greentrain.sim.job import SimJob
from greentrain.sim.ledger import Ledger
from greentrain.sim.noise import NO_NOISE, RateNoise, RateProfile
from greentrain.sim.placement import ZoneOutlook, choose_zone
from greentrain.sim.replay import ForecasterLike, TraceIndex, _latest_start, _probe, _snapshot, rate_estimator

__all__ = ["ZoneResult", "ZoneRun", "simulate_zones", "simulate_zones_run"]


@dataclass(frozen=True, slots=True)
class ZoneRun:
    """One run across zones: the ledger (segments with their zone, migrations) and the decisions made."""

    ledger: Ledger
    start: datetime
    deadline: datetime
    decisions: int
    forecast_deviation: DeviationTally

    @property
    def deadline_met(self) -> bool:
        return self.ledger.finished_at is not None and self.ledger.finished_at <= self.deadline


def simulate_zones_run(traces: Mapping[str, TraceIndex], start: datetime, job: SimJob, policy: Policy,
                       forecasters: Mapping[str, ForecasterLike], rates: RateProfile | None = None, *,
                       min_wait_saving: float = DEFAULT_MIN_SAVING_FRAC, estimate_error: float = 0.0) -> ZoneRun:
    """Run ``job`` from ``start`` in the zones of ``traces`` (the first is home); a move needs a saving of
    more than ``min_wait_saving`` of staying, as a wait does. Every trace must cover the run."""
    zones = list(traces)
    home = traces[zones[0]]
    first = home.index(start)
    deadline = start + timedelta(seconds=job.deadline_s)
    give_up = start + timedelta(seconds=2 * max(job.deadline_s, job.work_s))
    ledger = Ledger(job, rates=rates, origin=start)
    estimator = rate_estimator(estimate_error)
    skills = {zone: ForecastSkill() for zone in zones}
    mode, wake, paused, started_at, decisions = job.full, None, False, None, 0
    planned = zones[0]
    tally = DeviationTally()
    for t in range(first, len(home.points)):
        now = home.points[t].start
        if ledger.done or now >= give_up:
            break
        if wake is None or now >= wake:
            if paused or started_at is None:
                _probe(estimator, rates, now - start)
            if ledger.state != StartState.RUNNING and len(zones) > 1:
                planned = _place(traces, forecasters, job, ledger, estimator, now, deadline, min_wait_saving)
            trace = traces[planned]
            overhead_s = job.overhead_s(planned, ledger.zone)
            snapshot = _snapshot(trace, trace.index(now), job, ledger, deadline, forecasters[planned], mode,
                                 started_at, estimator, skills[planned], overhead_s)
            decision = policy.decide(snapshot, now)
            tally.score(now, snapshot.forecast, trace.actual_at)
            decision = worth_waiting(decision, snapshot, now, min_wait_saving)
            decision = keep_latest_start(decision, now, _latest_start(job, ledger, deadline, estimator, overhead_s),
                                         (home.points[t].end - now).total_seconds())
            decisions += 1
            paused = decision.action != Action.RUN
            wake = decision.until if paused else None
            if not paused:
                mode = job.mode_for(decision.power_limit_w, mode)
        if not paused and started_at is None:
            started_at = now
        where = (ledger.zone or planned) if paused else planned  # held hardware idles where it last ran
        point = traces[where].points[traces[where].index(now)]
        ledger.step(point, None if paused else mode, zone=where)
        if not paused:
            estimator.add(1.0 / ledger.last_rate)
    return ZoneRun(ledger, start, deadline, decisions, tally)


def _place(traces: Mapping[str, TraceIndex], forecasters: Mapping[str, ForecasterLike], job: SimJob,
           ledger: Ledger, estimator: RateEstimator, now: datetime, deadline: datetime, min_saving_frac: float) -> str:
    """The zone to (re)start in, from each zone's actual hour and forecast (``sim/placement.py``)."""
    hours_left = max(1, math.ceil((deadline - now).total_seconds() / 3600.0 - 1e-9) - 1)  # as _snapshot asks
    outlooks = []
    for zone, trace in traces.items():
        t = trace.index(now)
        forecast = forecasters[zone].forecast(trace.points[: t + 1], now, hours_left)
        overhead_s = 0.0 if ledger.state == StartState.FRESH else job.overhead_s(zone, ledger.zone)
        outlooks.append(ZoneOutlook(zone, trace.points[t], forecast, overhead_s))
    stay = ledger.zone or next(iter(traces))
    need_s = ledger.remaining_s * (estimator.spread_room_s() or 1.0) / job.full.speed
    return choose_zone(outlooks, stay, now=now, deadline=deadline, need_s=need_s, power_w=job.full.power_w,
                       min_saving_frac=min_saving_frac).zone


@dataclass(frozen=True, slots=True)
class ZoneResult:
    """One start: the run across zones and what it is compared with."""

    run: ZoneRun
    stay_home: ZoneRun
    greenest_at_start: ZoneRun
    greenest_zone: str
    run_now: Ledger
    """Run-now in the home zone."""
    oracle_by_zone: dict[str, Ledger]
    """Each zone's perfect-foresight optimum, pinned to it (no moves)."""


def greenest_at(traces: Mapping[str, TraceIndex], when: datetime) -> str:
    """The zone whose hour at ``when`` is the cleanest (the first such in order)."""
    return min(traces, key=lambda zone: traces[zone].points[traces[zone].index(when)].intensity_g_per_kwh)


def simulate_zones(traces: Mapping[str, TraceIndex], starts: Iterable[datetime], job: SimJob, policy: Policy,
                   forecasters: Mapping[str, ForecasterLike], *, oracle_bins: int = 4000,
                   noise: RateNoise = NO_NOISE, estimate_error: float = 0.0,
                   min_wait_saving: float = DEFAULT_MIN_SAVING_FRAC) -> list[ZoneResult]:
    """Each start across the zones, pinned home, pinned to the greenest zone at the start, and the baselines;
    every trace must cover every deadline."""
    cached = {zone: shared_per_hour(f) for zone, f in forecasters.items()}
    home = next(iter(traces))
    horizon_s = 2 * max(job.deadline_s, job.work_s) + 3600.0
    results = []
    for start in starts:
        rates = None if noise.kind == "none" else noise.profile(start, horizon_s)

        def pinned(zone: str) -> ZoneRun:
            return simulate_zones_run({zone: traces[zone]}, start, job, policy, cached, rates,
                                      min_wait_saving=min_wait_saving, estimate_error=estimate_error)

        green = greenest_at(traces, start)
        results.append(ZoneResult(
            run=simulate_zones_run(traces, start, job, policy, cached, rates, min_wait_saving=min_wait_saving,
                                   estimate_error=estimate_error),
            stay_home=pinned(home), greenest_at_start=pinned(green), greenest_zone=green,
            run_now=baselines.run_now(traces[home], start, job, rates),
            oracle_by_zone={zone: baselines.oracle(trace, start, job, oracle_bins, rates)
                            for zone, trace in traces.items()},
        ))
    return results
