"""Built-in policies: decisions on hand-made snapshots, purity, deadline safety."""

from __future__ import annotations

from dataclasses import replace

import pytest

from greentrain.errors import ConfigError
from greentrain.jobstats import JobState
from greentrain.policies import (
    Action,
    BestWindowPolicy,
    CarbonAwarePolicy,
    CompositePolicy,
    EnergyOptimalPolicy,
    ForecastOptimalPolicy,
    MaxSlowdownPolicy,
    OperatingPoint,
    RunNowPolicy,
    Snapshot,
    ThresholdPolicy,
)
from greentrain.policies.forecast_optimal import ForecastOptimalConfig
from greentrain.policies.power import MaxSlowdownConfig
from greentrain.policies.timing import ThresholdConfig
from greentrain.signals.base import Kind
from tests.policies.helpers import HOUR, T0, points

pytestmark = pytest.mark.timeout(60)


def snap(values, work_h, deadline_h, **kw) -> Snapshot:
    pts = points(values)
    return Snapshot(
        work_remaining_s=work_h * 3600,
        carbon_now=pts[0],
        forecast=tuple(replace(p, kind=Kind.FORECAST) for p in pts[1:]),
        deadline=T0 + deadline_h * HOUR,
        power_w=1000.0,
        **kw,
    )


POINTS = (
    OperatingPoint(power_limit_w=300.0, relative_speed=1.0, power_w=300.0),
    OperatingPoint(power_limit_w=200.0, relative_speed=0.8, power_w=180.0),
    OperatingPoint(power_limit_w=150.0, relative_speed=0.6, power_w=150.0),  # more J/work than 200 W
    OperatingPoint(power_limit_w=100.0, relative_speed=0.3, power_w=100.0),
)


def test_run_now_always_runs():
    d = RunNowPolicy().decide(snap([900, 1, 1], 1, 3), T0)
    assert d.action == Action.RUN
    assert d.plan == ((T0, T0 + HOUR),)


def test_forecast_optimal_waits_for_the_clean_hours():
    policy = ForecastOptimalPolicy()
    d = policy.decide(snap([500, 400, 50, 60, 300], 2, 5), T0)
    assert d.action == Action.DELAY_START
    assert d.until == T0 + HOUR
    assert d.plan == ((T0 + 2 * HOUR, T0 + 4 * HOUR),)


def test_forecast_optimal_is_pure():
    policy = ForecastOptimalPolicy()
    s = snap([500, 400, 50, 60, 300, 20, 500], 3, 7, state=JobState.PAUSED, resume_overhead_s=600)
    assert policy.decide(s, T0) == policy.decide(s, T0)
    assert policy.decide(s, T0) == ForecastOptimalPolicy().decide(s, T0)


def test_forecast_optimal_runs_flat_out_when_the_deadline_is_tight():
    d = ForecastOptimalPolicy().decide(snap([900, 1, 1], 3, 3), T0)
    assert d.action == Action.RUN
    d = ForecastOptimalPolicy().decide(snap([900, 1, 1], 5, 3), T0)  # impossible: best effort
    assert d.action == Action.RUN and "cannot be met" in d.reason


def test_margin_from_step_time_spread_forces_an_earlier_start():
    values = [500, 500, 10, 10, 500]
    calm = snap(values, 2, 4)
    # 2 h of work ending exactly at the deadline would be cleanest, but with sigma/mu = 0.2
    # and z = 2 the plan must cover 2.8 h, which starts now.
    noisy = replace(calm, step_time_s=1.0, step_time_std_s=0.2)
    assert ForecastOptimalPolicy().decide(calm, T0).action == Action.DELAY_START
    assert ForecastOptimalPolicy().decide(noisy, T0).action == Action.RUN
    assert ForecastOptimalPolicy(ForecastOptimalConfig(safety_z=0)).decide(noisy, T0).action == Action.DELAY_START


def test_paused_job_counts_resume_overhead():
    # 1 h of work, 3 h left, paused. Resuming costs 50 min: running now (dirty, 100) vs later (clean 60)
    # both pay it; the policy still waits for the clean hour because resume costs the same.
    s = snap([100, 60, 60], 1, 3, state=JobState.PAUSED, resume_overhead_s=3000)
    d = ForecastOptimalPolicy().decide(s, T0)
    assert d.action == Action.PAUSE
    # ...but not when the overhead leaves too little room after waiting.
    s = snap([100, 60], 1, 2, state=JobState.PAUSED, resume_overhead_s=3000)
    assert ForecastOptimalPolicy().decide(s, T0).action == Action.RUN


def test_threshold_runs_clean_pauses_dirty_and_respects_the_deadline():
    policy = ThresholdPolicy(ThresholdConfig(threshold_g_per_kwh=100))
    assert policy.decide(snap([50, 500, 500], 1, 3), T0).action == Action.RUN
    assert policy.decide(snap([500, 50, 50], 1, 3), T0).action == Action.DELAY_START
    # Pausing this hour would leave 1 h for 2 h of work: run despite the dirty grid.
    assert policy.decide(snap([500, 50], 2, 2), T0).action == Action.RUN


def test_threshold_percentile_of_the_window():
    policy = ThresholdPolicy(ThresholdConfig(percentile=25))
    assert policy.decide(snap([300, 100, 200, 400], 1, 4), T0).action == Action.DELAY_START
    assert policy.decide(snap([100, 300, 200, 400], 1, 4), T0).action == Action.RUN


def test_best_window_delays_the_start_then_never_pauses():
    policy = BestWindowPolicy()
    d = policy.decide(snap([300, 300, 10, 20, 300, 300], 2, 6), T0)
    assert d.action == Action.DELAY_START
    assert d.plan == ((T0 + 2 * HOUR, T0 + 4 * HOUR),)
    started = snap([300, 300, 10, 20, 300, 300], 2, 6, state=JobState.RUNNING)
    assert policy.decide(started, T0).action == Action.RUN


def test_energy_optimal_and_max_slowdown_pick_measured_points():
    s = snap([100], 1, 10, operating_points=POINTS)
    assert EnergyOptimalPolicy().decide(s, T0).power_limit_w == 200.0  # 225 J per unit of work
    assert MaxSlowdownPolicy(MaxSlowdownConfig(max_slowdown=0.1)).decide(s, T0).power_limit_w == 300.0
    assert MaxSlowdownPolicy(MaxSlowdownConfig(max_slowdown=0.25)).decide(s, T0).power_limit_w == 200.0
    bare = snap([100], 1, 10)
    assert EnergyOptimalPolicy().decide(bare, T0).power_limit_w is None


def test_carbon_aware_runs_fast_when_clean_and_efficient_when_dirty():
    policy = CarbonAwarePolicy()
    # 1.6 h of work in 3 h: clean first hour at full speed, then 0.6 h of work at 0.8 speed in 0.75 h.
    clean_first = policy.decide(snap([10, 500, 500], 1.6, 3, operating_points=POINTS), T0)
    assert clean_first.action == Action.RUN and clean_first.power_limit_w == 300.0
    dirty_now = policy.decide(snap([500, 500, 500], 1.6, 3, operating_points=POINTS), T0)
    assert dirty_now.action == Action.RUN and dirty_now.power_limit_w == 200.0


def test_forecast_optimal_ignores_power_points_but_carbon_aware_uses_them():
    s = snap([500, 500, 500], 1.6, 3, operating_points=POINTS)
    assert ForecastOptimalPolicy().decide(s, T0).power_limit_w == 300.0


def test_composite_plans_with_the_chosen_point_and_falls_back_for_the_deadline():
    policy = CompositePolicy(ForecastOptimalPolicy(), EnergyOptimalPolicy())
    roomy = policy.decide(snap([50, 500, 500, 500], 0.5, 4, operating_points=POINTS), T0)
    assert roomy.action == Action.RUN and roomy.power_limit_w == 200.0
    tight = policy.decide(snap([50, 500], 1.9, 2, operating_points=POINTS), T0)
    assert tight.action == Action.RUN and tight.power_limit_w == 300.0


def test_naive_now_is_refused():
    with pytest.raises(ConfigError, match="now"):
        ForecastOptimalPolicy().decide(snap([1], 1, 2), T0.replace(tzinfo=None))


def test_no_carbon_signal_means_run():
    s = Snapshot(work_remaining_s=3600, deadline=T0 + 5 * HOUR)
    for policy in (ForecastOptimalPolicy(), ThresholdPolicy(), BestWindowPolicy(), CarbonAwarePolicy()):
        assert policy.decide(s, T0).action == Action.RUN


def test_mid_interval_decision_uses_the_rest_of_the_current_hour():
    s = snap([10, 500, 500], 0.5, 3)
    d = ForecastOptimalPolicy().decide(s, T0 + 0.25 * HOUR)
    assert d.action == Action.RUN and d.until == T0 + HOUR
    assert d.plan == ((T0 + 0.25 * HOUR, T0 + 0.75 * HOUR),)


def test_cached_replanning_within_an_interval_matches_a_fresh_policy():
    values = [300, 120, 80, 400, 30, 90, 250, 60, 500, 40]
    kept = CarbonAwarePolicy()
    for i in range(12):
        now = T0 + (HOUR / 12) * i  # every 5 minutes within the first hour
        s = snap(values, 3.0 - 0.05 * i, 10, operating_points=POINTS, state=JobState.RUNNING)
        assert kept.decide(s, now) == CarbonAwarePolicy().decide(s, now)


def test_past_deadline_runs_and_naive_deadline_is_a_clear_error():
    late = snap([500, 10, 10], 1, 1)
    d = ForecastOptimalPolicy().decide(late, T0 + 2 * HOUR)
    assert d.action == Action.RUN and "deadline reached" in d.reason
    naive = replace(snap([500, 10], 1, 2), deadline=(T0 + 2 * HOUR).replace(tzinfo=None))
    with pytest.raises(ConfigError, match="snapshot.deadline"):
        ForecastOptimalPolicy().decide(naive, T0)


def test_clock_based_operating_points_come_back_as_clocks():
    points_by_clock = (
        OperatingPoint(sm_clocks_mhz=(1980, 1980), relative_speed=1.0, power_w=300.0),
        OperatingPoint(sm_clocks_mhz=(1410, 1410), relative_speed=0.8, power_w=180.0),
    )
    d = CarbonAwarePolicy().decide(snap([500, 500, 500], 1.6, 3, operating_points=points_by_clock), T0)
    assert d.action == Action.RUN and d.sm_clocks_mhz == (1410, 1410) and d.power_limit_w is None


def test_sub_hourly_forecasts_are_planned_per_hour():
    from greentrain.policies.window import intensity_slots

    half = [replace(p, start=T0 + i * HOUR / 2, end=T0 + (i + 1) * HOUR / 2)
            for i, p in enumerate(points([100, 300, 10, 30, 50, 70]))]
    s = Snapshot(work_remaining_s=1800, carbon_now=half[0], forecast=tuple(half[1:]), deadline=T0 + 3 * HOUR)
    slots = intensity_slots(s, T0, T0 + 3 * HOUR)
    assert [(sl.start, sl.end, sl.intensity_g_per_kwh) for sl in slots] == [
        (T0, T0 + HOUR / 2, 100.0),
        (T0 + HOUR / 2, T0 + HOUR, 300.0),
        (T0 + HOUR, T0 + 2 * HOUR, 20.0),
        (T0 + 2 * HOUR, T0 + 3 * HOUR, 60.0),
    ]
    assert ForecastOptimalPolicy().decide(s, T0).plan == ((T0 + HOUR, T0 + 1.5 * HOUR),)
