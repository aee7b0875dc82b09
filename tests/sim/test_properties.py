"""Property checks over random small traces: the oracle bounds every policy; with perfect
forecasts forecast-optimal (without its margin for forecast error) is the idle-aware oracle, held
hardware or released; no built-in policy misses a feasible deadline."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greentrain.policies import load_policy
from greentrain.policies.forecast_optimal import ForecastOptimalConfig, ForecastOptimalPolicy
from greentrain.policies.slot_planner import Mode
from greentrain.sim import SimJob, TraceIndex, simulate
from tests.policies.helpers import (
    T0,
    PerfectTestForecaster,
    PersistenceForecaster,
    points,
)

pytestmark = pytest.mark.timeout(120)

cases = st.tuples(
    st.lists(st.integers(min_value=0, max_value=800), min_size=30, max_size=30),
    st.integers(min_value=1, max_value=6),  # work, hours
    st.integers(min_value=0, max_value=12),  # extra hours before the deadline
    st.sampled_from([0.0, 5.0, 30.0]),  # resume overhead, minutes
    st.sampled_from([0.0, 120.0, 400.0]),  # waiting draw, watts
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases)
def test_oracle_bounds_policies_and_perfect_forecasts_reach_it(case):
    values, work_h, slack_h, overhead_min, waiting_w = case
    trace = TraceIndex(points(values))
    job = SimJob(work_s=work_h * 3600, deadline_s=(work_h + slack_h) * 3600, modes=(Mode(1.0, 1000.0),),
                 resume_overhead_s=overhead_min * 60, waiting_power_w=waiting_w)
    exact = ForecastOptimalPolicy(ForecastOptimalConfig(min_pause_saving=0.0))
    # The exact planner as it is (the engine's wait gate trades tiny savings for robustness: not exact).
    [optimal] = simulate(trace, [T0], job, exact, PerfectTestForecaster(trace.points), engine_gate=False)
    assert optimal.deadline_met
    assert optimal.policy.emissions_g == pytest.approx(optimal.oracle.emissions_g, rel=1e-9, abs=1e-9)
    assert optimal.oracle.emissions_g <= optimal.best_window.emissions_g + 1e-9
    assert optimal.best_window.emissions_g <= optimal.run_now.emissions_g + 1e-9
    for name in ("forecast-optimal", "threshold", "best-window", "carbon-aware", "run-now"):
        [result] = simulate(trace, [T0], job, load_policy(name), PersistenceForecaster())
        assert result.deadline_met, name
        assert result.policy.emissions_g >= result.oracle.emissions_g - 1e-9, name
