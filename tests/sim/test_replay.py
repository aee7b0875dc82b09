"""The replay loop: causality, same-code-path decisions, honouring Decision.until."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest

from greentrain.policies import (
    Action,
    CarbonAwarePolicy,
    Decision,
    ForecastOptimalPolicy,
    Policy,
)
from greentrain.policies.slot_planner import Mode
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.trace import load_trace
from greentrain.sim import SimJob, TraceIndex, oracle, simulate, simulate_run
from tests.policies.helpers import (
    HOUR,
    T0,
    PerfectTestForecaster,
    PersistenceForecaster,
    points,
)

pytestmark = pytest.mark.timeout(120)


class Recording(Policy):
    """Wraps a policy and records every (now, snapshot, decision)."""

    name = "recording"

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.calls: list = []

    def decide(self, snapshot, now):
        decision = self.inner.decide(snapshot, now)
        self.calls.append((now, snapshot, decision))
        return decision


def _perturbed(trace, cut, seed=7):
    rng = random.Random(seed)
    return [p if p.start <= cut else replace(p, intensity_g_per_kwh=p.intensity_g_per_kwh * rng.uniform(0.2, 3))
            for p in trace]


def _decisions_until(forecaster_factory, trace_a, trace_b, start, cut, job):
    runs = []
    for trace in (trace_a, trace_b):
        policy = Recording(CarbonAwarePolicy())
        simulate_run(TraceIndex(trace), start, job, policy, forecaster_factory(trace))
        runs.append(policy.calls)
    before = [[(now, s, d) for now, s, d in calls if now <= cut] for calls in runs]
    after = [[d for now, _, d in calls if now > cut] for calls in runs]
    return before, after


@pytest.mark.parametrize("forecaster", ["real", "persistence"])
def test_perturbing_the_future_changes_nothing_decided_before(carbon_trace, forecaster):
    trace = load_trace(carbon_trace("DE-LU_2022_hourly.csv"))[24 * 60 : 24 * 100]
    start = trace[24 * 30].start
    cut = start + 10 * HOUR
    factory = (lambda t: Forecaster()) if forecaster == "real" else (lambda t: PersistenceForecaster())
    job = SimJob(work_s=12 * 3600, deadline_s=36 * 3600, modes=(Mode(1.0, 1000.0),), resume_overhead_s=300)
    before, after = _decisions_until(factory, trace, _perturbed(trace, cut), start, cut, job)
    assert len(before[0]) == 11
    assert before[0] == before[1]
    assert after[0] != after[1]  # the perturbation does matter later on


def test_a_leaky_forecaster_would_be_caught(carbon_trace):
    # Negative control: the same check with a forecaster that sees the future does differ.
    trace = load_trace(carbon_trace("DE-LU_2022_hourly.csv"))[24 * 60 : 24 * 100]
    start = trace[24 * 30].start
    cut = start + 10 * HOUR
    job = SimJob(work_s=12 * 3600, deadline_s=36 * 3600, modes=(Mode(1.0, 1000.0),), resume_overhead_s=300)
    before, _ = _decisions_until(PerfectTestForecaster, trace, _perturbed(trace, cut), start, cut, job)
    assert before[0] != before[1]


def test_snapshot_carries_only_the_past_and_present():
    trace = points([5, 1, 9, 1, 5, 2, 2, 2])
    policy = Recording(ForecastOptimalPolicy())
    job = SimJob(work_s=2 * 3600, deadline_s=5 * 3600, modes=(Mode(1.0, 1000.0),), resume_overhead_s=1800)
    simulate_run(TraceIndex(trace), T0, job, policy, PersistenceForecaster())
    for now, snapshot, _ in policy.calls:
        assert snapshot.carbon_now.start == now
        assert all(p.start > now for p in snapshot.forecast)
        assert snapshot.deadline == T0 + 5 * HOUR


def test_perfect_forecasts_reproduce_the_oracle_by_hand():
    trace = TraceIndex(points([5, 1, 9, 1, 5, 2, 2, 2]))
    job = SimJob(work_s=2 * 3600, deadline_s=5 * 3600, modes=(Mode(1.0, 1000.0),), resume_overhead_s=1800)
    [result] = simulate(trace, [T0], job, ForecastOptimalPolicy(), PerfectTestForecaster(trace.points))
    assert result.policy.emissions_g == pytest.approx(4.5)
    assert result.oracle.emissions_g == pytest.approx(4.5)
    assert result.run_now.emissions_g == pytest.approx(5 + 1)
    assert result.deadline_met and result.policy.resumes == 1


def test_power_dimension_with_perfect_forecasts_matches_the_power_oracle():
    modes = (Mode(1.0, 1000.0, 300.0), Mode(0.5, 400.0, 150.0))
    trace = TraceIndex(points([1, 10, 10, 10, 50, 1]))
    job = SimJob(work_s=2 * 3600, deadline_s=3 * 3600, modes=modes, resume_overhead_s=300, profiled=True)
    [result] = simulate(trace, [T0], job, CarbonAwarePolicy(), PerfectTestForecaster(trace.points))
    assert result.policy.emissions_g == pytest.approx(oracle(trace, T0, job).emissions_g) == pytest.approx(9.0)
    assert [i.power_limit_w for i in result.policy.schedule] == [300.0, 150.0]


class SleepUntil(Policy):
    """Pauses once until a fixed time, then runs; counts calls."""

    name = "sleep-until"

    def __init__(self, until):
        self.until = until
        self.calls = 0

    def decide(self, snapshot, now):
        self.calls += 1
        if now < self.until:
            return Decision(action=Action.DELAY_START, until=self.until)
        return Decision(action=Action.RUN)


def test_pause_is_honoured_until_the_decision_says():
    trace = TraceIndex(points([1] * 10))
    policy = SleepUntil(T0 + 4 * HOUR)
    job = SimJob(work_s=3600, deadline_s=8 * 3600, modes=(Mode(1.0, 1000.0),))
    # The policy as it is: on a constant trace the engine's gate would (rightly) refuse this wait.
    run = simulate_run(trace, T0, job, policy, PersistenceForecaster(), engine_gate=False)
    assert policy.calls == 2  # once at the start, once at the wake-up time
    assert run.ledger.schedule[0].start == T0 + 4 * HOUR
    assert run.ledger.resumes == 0  # a delayed first start is not a resume


def test_a_policy_that_never_runs_is_reported_unfinished():
    trace = TraceIndex(points([1] * 20))

    class Never(Policy):
        name = "never"

        def decide(self, snapshot, now):
            return Decision(action=Action.PAUSE, until=now + timedelta(hours=1))

    job = SimJob(work_s=3600, deadline_s=4 * 3600, modes=(Mode(1.0, 1000.0),))
    [result] = simulate(trace, [T0], job, Never(), PersistenceForecaster(), engine_gate=False)
    assert result.policy.finished_at is None and not result.deadline_met
