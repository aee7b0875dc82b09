"""Properties of the pipeline timeline and the planner on random stage profiles."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greentrain.stageclocks import ClockPoint, StageProfile, plan_stage_clocks, simulate

pytestmark = pytest.mark.timeout(60)
durations = st.lists(st.floats(min_value=0.001, max_value=1.0), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(fwd=durations, scale=st.floats(min_value=1.0, max_value=3.0), m=st.integers(1, 12),
       schedule=st.sampled_from(["1f1b", "gpipe"]), bump=st.integers(0, 4))
def test_timeline_bounds_and_monotonicity(fwd: list[float], scale: float, m: int, schedule: str, bump: int) -> None:
    bwd = [f * scale for f in fwd]
    t = simulate(fwd, bwd, m, schedule).iteration_s  # type: ignore[arg-type]
    assert t >= max(m * (f + b) for f, b in zip(fwd, bwd)) - 1e-9  # no stage does its work faster than alone
    assert t >= sum(fwd) + sum(bwd) - 1e-9  # one microbatch must cross every stage both ways
    slower = list(fwd)
    slower[bump % len(fwd)] *= 1.5
    assert simulate(slower, bwd, m, schedule).iteration_s >= t - 1e-9  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(base=st.lists(st.floats(min_value=0.005, max_value=0.02), min_size=2, max_size=4),
       m=st.integers(2, 12), tol=st.floats(min_value=0.0, max_value=0.05))
def test_plan_never_exceeds_bound_or_costs_energy(base: list[float], m: int, tol: float) -> None:
    clocks = [1500, 1300, 1100, 900]
    profiles = [
        StageProfile(tuple(ClockPoint(c, f * (0.3 + 0.7 * 1500 / c), 2 * f * (0.3 + 0.7 * 1500 / c),
                                      60 + 240 * (c / 1500) ** 2) for c in clocks), idle_power_w=60.0)
        for f in base
    ]
    plan = plan_stage_clocks(profiles, m, tolerance=tol)
    assert plan.iteration_s <= plan.baseline_iteration_s * (1 + tol) + 1e-9
    assert plan.energy_j <= plan.baseline_energy_j + 1e-9
