"""The DP planner against hand-computed cases and brute force."""

from __future__ import annotations

import random

import pytest

from greentrain.policies.slot_planner import Mode, Slot, StartState, plan_schedule
from tests.policies.helpers import HOUR, T0, brute_force

pytestmark = pytest.mark.timeout(60)

KW = Mode(1.0, 1000.0)


def slots(values):
    return [Slot(T0 + i * HOUR, T0 + (i + 1) * HOUR, float(v)) for i, v in enumerate(values)]


def test_pause_and_resume_pays_overhead_by_hand():
    # 2 h of work, 30 min resume overhead, 1 kW. Best: run hour 1 (1 g), pause hour 2,
    # resume in hour 3 (0.5 h overhead + 0.5 h work at 1 g/kWh... = 1 g), finish 0.5 h in hour 4 (2.5 g).
    plan = plan_schedule(slots([5, 1, 9, 1, 5]), 2 * 3600, [KW], overhead_s=1800)
    assert plan is not None
    assert plan.emissions_g == pytest.approx(1 + 1 + 2.5)
    assert [m is not None for m in plan.modes] == [False, True, False, True, True]
    assert plan.run_s == (0.0, 3600.0, 0.0, 3600.0, 1800.0)
    assert plan.running_intervals() == ((T0 + HOUR, T0 + 2 * HOUR), (T0 + 3 * HOUR, T0 + 4.5 * HOUR))
    assert plan.finish == T0 + 4.5 * HOUR


def test_overhead_too_high_keeps_the_run_contiguous():
    # With a 50 min overhead, splitting costs more than running hours 1-2 together (1 + 3 g).
    plan = plan_schedule(slots([5, 1, 3, 1, 5]), 2 * 3600, [KW], overhead_s=3000)
    assert plan.emissions_g == pytest.approx(4.0)
    assert plan.running_intervals() == ((T0 + HOUR, T0 + 3 * HOUR),)


def test_first_start_is_free_but_a_paused_job_pays_to_resume():
    fresh = plan_schedule(slots([9, 1, 1]), 2 * 3600, [KW], overhead_s=1800, state=StartState.FRESH)
    paused = plan_schedule(slots([9, 1, 1, 1]), 2 * 3600, [KW], overhead_s=1800, state=StartState.PAUSED)
    assert fresh.emissions_g == pytest.approx(2.0)
    assert paused.emissions_g == pytest.approx(2.5)  # 0.5 h overhead at full power, then 2 h of work


def test_running_job_continues_without_overhead():
    plan = plan_schedule(slots([2, 2]), 2 * 3600, [KW], overhead_s=1800, state=StartState.RUNNING)
    assert plan.emissions_g == pytest.approx(4.0)


def test_infeasible_deadline_returns_none():
    assert plan_schedule(slots([1, 1]), 2.5 * 3600, [KW]) is None
    # Paused: the resume overhead makes exactly 2 h of work impossible in 2 h.
    assert plan_schedule(slots([1, 1]), 2 * 3600, [KW], overhead_s=60, state=StartState.PAUSED) is None


def test_equal_costs_run_early():
    plan = plan_schedule(slots([3, 3, 3, 3]), 2 * 3600, [KW])
    assert plan.running_intervals() == ((T0, T0 + 2 * HOUR),)


def test_power_modes_by_hand():
    # Full speed 1 kW, half speed 0.4 kW (less energy per work). 2 h of work in 3 h:
    # options are (full, full) in two hours, or half speed + full. Clean hour 0 (1), dirty 1-2 (10).
    fast, slow = Mode(1.0, 1000.0, 300.0), Mode(0.5, 400.0, 150.0)
    plan = plan_schedule(slots([1, 10, 10]), 2 * 3600, [fast, slow])
    # Best: full in hour 0 (1 g) then 1 h of work: full for 1 h (10 g) vs half for 2 h (0.8 kWh -> 8 g).
    assert plan.emissions_g == pytest.approx(1 + 8)
    assert [m.power_limit_w if m else None for m in plan.modes] == [300.0, 150.0, 150.0]


@pytest.mark.parametrize("seed", range(12))
def test_dp_matches_brute_force(seed):
    rng = random.Random(seed)
    values = [rng.choice([10, 50, 100, 200, 400]) for _ in range(6)]
    modes = [Mode(1.0, 1000.0, 250.0), Mode(0.75, 600.0, 150.0), Mode(0.5, 450.0, 100.0)]
    work_s = rng.choice([1, 2, 3]) * 3600.0 + rng.choice([0, 900, 1800])
    overhead_s = rng.choice([0.0, 300.0, 1200.0])
    plan = plan_schedule(slots(values), work_s, modes, overhead_s=overhead_s, max_bins=4000)
    expected = brute_force(values, work_s, modes, overhead_s)
    assert plan is not None and expected is not None
    assert plan.emissions_g == pytest.approx(expected, rel=1e-6)


def test_pessimism_keeps_the_plan_inside_the_slower_rates_envelope():
    # 2 h of work, clean only in the last two of six hours. At the expected rate the plan waits for them.
    # At twice the time (pessimism 2) the work left at each hour's start must fit twice over before the
    # end: with 2 h left it may not wait past hour 2, with 1 h left not past hour 4. Cheapest inside that:
    # one dirty hour now, then the first clean hour (5 + 1 g), not the 10 g of a later contiguous start.
    values = [5, 5, 5, 5, 1, 1]
    expected = plan_schedule(slots(values), 2 * 3600, [KW])
    assert expected.running_intervals() == ((T0 + 4 * HOUR, T0 + 6 * HOUR),)
    enveloped = plan_schedule(slots(values), 2 * 3600, [KW], pessimism=2.0)
    assert enveloped.emissions_g == pytest.approx(6.0)
    assert enveloped.running_intervals() == ((T0, T0 + HOUR), (T0 + 4 * HOUR, T0 + 5 * HOUR))


def test_pessimism_that_cannot_fit_gives_no_plan_and_one_never_waits_past_it():
    assert plan_schedule(slots([5, 5, 1]), 2 * 3600, [KW], pessimism=2.0) is None  # 4 h needed, 3 h left
    with pytest.raises(ValueError):
        plan_schedule(slots([5, 5, 1]), 2 * 3600, [KW], pessimism=0.5)
