"""The wait gate decides by expected net saving (policies/worth.py), on a forecast read through its measured
bias (policies/calibrate.py), and the simulator's deadline room comes from the rate's measured spread."""

from __future__ import annotations

from dataclasses import replace

import pytest

from greentrain.jobstats import JobState
from greentrain.policies import Action, Decision, ForecastOptimalPolicy, Snapshot
from greentrain.policies.calibrate import calibrated
from greentrain.policies.worth import win_probability, worth_waiting
from greentrain.signals.base import Kind
from greentrain.signals.forecast.liveskill import ForecastSkill
from greentrain.sim import SimJob, TraceIndex, simulate_run
from greentrain.sim.noise import RateProfile
from tests.policies.helpers import HOUR, T0, PerfectTestForecaster, points

pytestmark = pytest.mark.timeout(120)


def _snapshot(now_g: float, future_g: list[float], **extra) -> Snapshot:
    return Snapshot(work_remaining_s=4 * 3600, power_w=1000.0, carbon_now=points([now_g])[0],
                    forecast=tuple(points(future_g, T0 + HOUR, Kind.FORECAST)), deadline=T0 + 24 * HOUR,
                    state=JobState.WAITING, **extra)


def _delay(saving_g: float) -> Decision:
    return Decision(action=Action.DELAY_START, until=T0 + HOUR, plan=((T0 + 10 * HOUR, T0 + 14 * HOUR),),
                    saving_g=saving_g, plan_saving_g=saving_g, reason="test: delay")


class _Biased:
    """The true future, each value ``offset_g`` off: a forecast with a pure bias and no noise."""

    def __init__(self, trace, offset_g: float) -> None:
        self.perfect, self.offset_g = PerfectTestForecaster(trace), offset_g

    def forecast(self, history, now, horizon_h=72):
        return [replace(p, intensity_g_per_kwh=p.intensity_g_per_kwh + self.offset_g)
                for p in self.perfect.forecast(history, now, horizon_h)]


def test_a_constant_signal_waits_zero_seconds() -> None:
    # Even a large claimed saving and no measured error: a constant signal cannot reward waiting.
    decision = worth_waiting(_delay(500.0), _snapshot(300.0, [300.0] * 23), T0)
    assert decision.action == Action.RUN and "constant carbon signal" in decision.reason
    trace = TraceIndex(points([300.0] * (24 * 10)))
    job = SimJob.constant_power(work_h=4, deadline_h=24)
    run = simulate_run(trace, T0 + 8 * 24 * HOUR, job, ForecastOptimalPolicy(), PerfectTestForecaster(trace.points))
    assert run.ledger.finished_at == T0 + 8 * 24 * HOUR + 4 * HOUR  # no second of waiting


def test_unbiased_symmetric_error_does_not_block_a_large_expected_saving() -> None:
    # The forecast's typical error (500 g/kWh at every horizon) times the 1 kWh the wait moves is more
    # than the 400 g the plan expects to save; with no bias that error is as likely either way.
    future = [300.0] * 9 + [200.0] * 4 + [300.0] * 10
    snapshot = _snapshot(300.0, future, forecast_error_g_per_kwh=(500.0,) * 23)
    decision = worth_waiting(_delay(400.0), snapshot, T0)
    assert decision.action == Action.DELAY_START
    assert 0.5 < win_probability(400.0, 1.4826 * 500.0 * 1.0) < 1.0


def test_a_saving_under_the_floor_still_runs_now() -> None:
    snapshot = _snapshot(300.0, [300.0] * 9 + [299.0] * 14)
    decision = worth_waiting(_delay(1.0), snapshot, T0)  # 1 g of a job of ~1.2 kg: under 0.5 %
    assert decision.action == Action.RUN


def test_a_measured_bias_is_taken_out_of_the_plan() -> None:
    # The forecast says hours 8-11 are 60 g/kWh cleaner than now; its record says it runs 60 low there.
    future = [300.0] * 7 + [240.0] * 4 + [300.0] * 12
    bias = (0.0,) * 7 + (-60.0,) * 4 + (0.0,) * 12
    naive = ForecastOptimalPolicy().decide(_snapshot(300.0, future), T0)
    assert naive.action == Action.DELAY_START
    corrected = _snapshot(300.0, future, forecast_bias_g_per_kwh=bias)
    assert [p.intensity_g_per_kwh for p in calibrated(corrected, T0).forecast] == [300.0] * 23
    assert ForecastOptimalPolicy().decide(corrected, T0).action == Action.RUN


def test_the_skill_measures_a_bias_and_ignores_noise() -> None:
    skill = ForecastSkill(max_h=4, min_scored=6)
    steady = ForecastSkill(max_h=4, min_scored=6)
    for hour in range(200):
        actual = points([300.0], T0 + hour * HOUR)[0]
        skill.observe(actual)
        steady.observe(actual)
        skill.record(actual.start, points([250.0] * 4, actual.start + HOUR, Kind.FORECAST))
        noise = 40.0 if hour % 2 else -40.0  # symmetric: no bias
        steady.record(actual.start, points([300.0 + noise] * 4, actual.start + HOUR, Kind.FORECAST))
    assert skill.bias_g_per_kwh() == pytest.approx((-50.0,) * 4)
    assert steady.bias_g_per_kwh() == pytest.approx((0.0,) * 4, abs=1e-9)


def test_a_day_of_errors_one_way_is_weather_not_a_bias() -> None:
    # A forecast 50 g/kWh low for a whole day: one spell of weather. Only after three days of it is it a bias.
    skill = ForecastSkill(max_h=4, min_scored=6)
    for hour in range(4 * 24):
        actual = points([300.0], T0 + hour * HOUR)[0]
        skill.observe(actual)
        skill.record(actual.start, points([250.0] * 4, actual.start + HOUR, Kind.FORECAST))
        if hour == 24:
            assert skill.errors_g_per_kwh() == pytest.approx((50.0,) * 4)  # its size is measured at once
            assert skill.bias_g_per_kwh() == pytest.approx((0.0,) * 4)
    assert skill.bias_g_per_kwh() == pytest.approx((-50.0,) * 4)


def test_a_biased_forecaster_is_corrected_from_its_record_before_the_start() -> None:
    # Actual: a flat 300 g/kWh. The forecaster sees every future hour 60 g/kWh cleaner than it will be. Read
    # as it is, the plan waits for hours that never come; calibrated on the week before the start, it does not.
    # (The simulator's default scores the forecast as the run goes; ``calibrate_days`` adds its earlier record.)
    trace = TraceIndex(points([300.0] * (24 * 12)))
    start = T0 + 9 * 24 * HOUR
    job = SimJob.constant_power(work_h=4, deadline_h=24)
    forecaster = _Biased(trace.points, -60.0)
    naive = simulate_run(trace, start, job, ForecastOptimalPolicy(), forecaster, calibrate_days=0)
    assert naive.ledger.finished_at > start + 6 * HOUR  # it waited
    run = simulate_run(trace, start, job, ForecastOptimalPolicy(), forecaster, calibrate_days=7)
    assert run.ledger.finished_at == start + 4 * HOUR


def _tempting_trace() -> TraceIndex:
    """Dirty for 16 h, clean for the last 8 h of a day: a job of 8 h wants to start as late as it may."""
    day = [500.0] * 16 + [100.0] * 8
    return TraceIndex(points(day * 12))


def test_a_steady_rate_keeps_no_room() -> None:
    trace = _tempting_trace()
    start = T0 + 9 * 24 * HOUR
    job = SimJob.constant_power(work_h=8, deadline_h=24)
    run = simulate_run(trace, start, job, ForecastOptimalPolicy(), PerfectTestForecaster(trace.points))
    assert run.ledger.finished_at == start + 24 * HOUR  # the clean 8 h, to the last minute: no room kept


def test_a_noisy_rate_keeps_the_room_its_spread_asks_for() -> None:
    # The rate moves while the job waits: 1.0, then 0.6, 1.0, and from hour 9 on 0.55 (running at once, the
    # job would still finish in time: 0.55 × 24 h > 8 h). Planning at the nominal rate, it would start at hour
    # 16 and miss; the spread its probes measure while it waits moves the start up.
    trace = _tempting_trace()
    start = T0 + 9 * 24 * HOUR
    job = SimJob.constant_power(work_h=8, deadline_h=24)
    rates = RateProfile((0.0, 3 * 3600.0, 6 * 3600.0, 9 * 3600.0), (1.0, 0.6, 1.0, 0.55))
    run = simulate_run(trace, start, job, ForecastOptimalPolicy(), PerfectTestForecaster(trace.points), rates)
    assert run.ledger.finished_at is not None and run.ledger.finished_at <= start + 24 * HOUR


def test_a_spell_slower_than_any_seen_still_meets_the_deadline() -> None:
    # The rate-noise benchmark's miss (US-CAL-CISO 2021-04-29, seed 11): 1.14, 0.94, 0.85, 0.90 while the job
    # waits, then 0.61 for six hours. With the room of the slowest rate seen (0.85) it started too late.
    trace = _tempting_trace()
    start = T0 + 9 * 24 * HOUR
    job = SimJob.constant_power(work_h=8, deadline_h=24)
    rates = RateProfile(tuple(h * 3600.0 for h in (0, 3, 8, 13, 17, 23, 25)), (1.14, 0.94, 0.85, 0.9, 0.61, 0.68, 1.19))
    run = simulate_run(trace, start, job, ForecastOptimalPolicy(), PerfectTestForecaster(trace.points), rates)
    assert run.ledger.finished_at is not None and run.ledger.finished_at <= start + 24 * HOUR


def test_the_room_is_the_measured_spread() -> None:
    from greentrain.policies.rate import RateEstimator

    steady, noisy = (RateEstimator(recent=3, history=48, min_samples=2, prior_s=1.0) for _ in range(2))
    for hour in range(12):
        steady.add(1.0)
        noisy.add(1.6 if hour == 5 else 1.0)  # one slow spell, too rare for the 90 % quantile
    assert steady.spread_room_s() == pytest.approx(1.0)  # nothing slower seen: no room
    assert noisy.robust_s == pytest.approx(1.0) and noisy.pessimistic_s == pytest.approx(1.0)
    assert noisy.spread_room_s() == pytest.approx(1.6 + 2 * 0.6)  # the slowest seen, and twice the spread below
