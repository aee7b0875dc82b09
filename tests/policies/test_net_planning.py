"""Planning net of the waiting draw: the DP charges held idle power, every planner refuses a pause
that does not pay for it, and the margin for forecast error holds back marginal pauses."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from greentrain.errors import ConfigError
from greentrain.jobstats import JobState
from greentrain.policies import OperatingPoint, Snapshot, load_policy
from greentrain.policies.base import Action
from greentrain.policies.forecast_optimal import ForecastOptimalConfig, ForecastOptimalPolicy
from greentrain.policies.slot_planner import Mode, Slot, plan_schedule
from tests.policies.helpers import HOUR, T0, brute_force, points
from greentrain.signals.base import Kind

pytestmark = pytest.mark.timeout(60)

KW = Mode(1.0, 1000.0)


def slots(values):
    return [Slot(T0 + i * HOUR, T0 + (i + 1) * HOUR, float(v)) for i, v in enumerate(values)]


def test_dp_charges_waiting_after_the_first_start_by_hand():
    # 2 h of work in [100, 400, 100] at 1 kW. Pausing hour 1 holds 120 W idle: 0.12 kWh x 400 = 48 g.
    plan = plan_schedule(slots([100, 400, 100]), 2 * 3600, [KW], waiting_power_w=120.0)
    assert [m is not None for m in plan.modes] == [True, False, True]
    assert plan.emissions_g == pytest.approx(100 + 48 + 100)
    assert plan.waiting_j == pytest.approx(120.0 * 3600)
    assert plan.energy_j == pytest.approx(2 * 3.6e6 + 120.0 * 3600)


def test_gross_optimal_pause_is_refused_when_net_negative():
    # [100, 130, 100]: free pauses would run hours 0 and 2 (200 g). Holding 500 W through hour 1 costs
    # 65 g, so that plan emits 265 g > running at once (230 g); delaying the start (free) also gives 230 g
    # and the tie goes to running early.
    gross = plan_schedule(slots([100, 130, 100]), 2 * 3600, [KW])
    assert gross.emissions_g == pytest.approx(200) and gross.modes[1] is None
    net = plan_schedule(slots([100, 130, 100]), 2 * 3600, [KW], waiting_power_w=500.0)
    assert net.emissions_g == pytest.approx(230)
    assert [m is not None for m in net.modes] == [True, True, False]
    assert net.waiting_j == 0.0


def test_waiting_before_the_first_start_is_free():
    plan = plan_schedule(slots([300, 100, 100]), 2 * 3600, [KW], waiting_power_w=900.0)
    assert plan.emissions_g == pytest.approx(200) and plan.waiting_j == 0.0
    assert plan.pause_saving_g == pytest.approx(300 - 100)  # run hours 0-1 (400 g) vs 1-2 (200 g)


def test_negative_waiting_power_is_refused():
    with pytest.raises(ValueError, match="waiting_power_w"):
        plan_schedule(slots([1, 1]), 3600, [KW], waiting_power_w=-1.0)


@pytest.mark.parametrize("seed", range(12))
def test_dp_with_waiting_matches_brute_force(seed):
    rng = random.Random(100 + seed)
    values = [rng.choice([10, 50, 100, 200, 400]) for _ in range(6)]
    modes = [Mode(1.0, 1000.0, 250.0), Mode(0.75, 600.0, 150.0), Mode(0.5, 450.0, 100.0)]
    work_s = rng.choice([1, 2, 3]) * 3600.0 + rng.choice([0, 900, 1800])
    overhead_s = rng.choice([0.0, 300.0, 1200.0])
    waiting_w = rng.choice([0.0, 120.0, 400.0])
    plan = plan_schedule(slots(values), work_s, modes, overhead_s=overhead_s, max_bins=4000,
                         waiting_power_w=waiting_w)
    expected = brute_force(values, work_s, modes, overhead_s, waiting_w)
    assert plan is not None and expected is not None
    assert plan.emissions_g == pytest.approx(expected, rel=1e-6)


def _snapshot(values, *, work_h, deadline_h, waiting_w, state=JobState.RUNNING, ops=()):
    trace = points(values)
    return Snapshot(work_remaining_s=work_h * 3600, power_w=1000.0, carbon_now=trace[0],
                    forecast=tuple(points(values[1:], T0 + HOUR, Kind.FORECAST)),
                    deadline=T0 + timedelta(hours=deadline_h), state=state, started_at=T0 - HOUR,
                    waiting_power_w=waiting_w, operating_points=ops)


OPS = (OperatingPoint(power_limit_w=300.0, relative_speed=1.0, power_w=1000.0),
       OperatingPoint(power_limit_w=200.0, relative_speed=0.8, power_w=760.0))


@pytest.mark.parametrize("name", ["forecast-optimal", "carbon-aware", "threshold"])
def test_every_planner_refuses_a_net_negative_pause(name):
    # A running job, 1 h of work, 130 g/kWh now and 100 after: pausing saves 30 g of running but holding
    # 500 W idle through this hour costs 65 g. With the hardware released (0 W) the pause pays.
    ops = OPS if name == "carbon-aware" else ()
    policy = load_policy(name)
    released = policy.decide(_snapshot([130, 100, 100], work_h=1, deadline_h=3, waiting_w=0.0, ops=ops), T0)
    assert released.action == Action.PAUSE
    held = policy.decide(_snapshot([130, 100, 100], work_h=1, deadline_h=3, waiting_w=500.0, ops=ops), T0)
    assert held.action == Action.RUN
    assert "net" in held.reason


def test_best_window_only_delays_a_start_which_costs_nothing():
    policy = load_policy("best-window")
    waiting = _snapshot([300, 100, 100], work_h=2, deadline_h=3, waiting_w=900.0, state=JobState.WAITING)
    assert policy.decide(waiting, T0).action == Action.DELAY_START
    started = _snapshot([300, 100, 100], work_h=2, deadline_h=3, waiting_w=0.0)
    assert policy.decide(started, T0).action == Action.RUN  # never pauses once started


def test_margin_holds_back_a_pause_within_forecast_error():
    # Released hardware, 1 h of work: pausing at 102 for 100 later saves 2 g of 102 (2 %).
    snap = _snapshot([102, 100, 100], work_h=1, deadline_h=3, waiting_w=0.0)
    assert ForecastOptimalPolicy(ForecastOptimalConfig(min_pause_saving=0.0)).decide(snap, T0).action == Action.PAUSE
    assert ForecastOptimalPolicy(ForecastOptimalConfig(min_pause_saving=0.05)).decide(snap, T0).action == Action.RUN


def test_bad_waiting_power_names_the_field():
    with pytest.raises(ConfigError, match="waiting_power_w"):
        Snapshot(work_remaining_s=1.0, waiting_power_w=-5.0)
    with pytest.raises(ConfigError, match="waiting_power_w"):
        Snapshot(work_remaining_s=1.0, waiting_power_w="lots")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="min_pause_saving"):
        ForecastOptimalConfig(min_pause_saving=-0.1)
