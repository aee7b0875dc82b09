"""simulate() shares one forecast per hour between starts, and only where that changes nothing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from greentrain.policies import ForecastOptimalPolicy
from greentrain.policies.slot_planner import Mode
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.trace import load_trace
from greentrain.sim import SimJob, TraceIndex, simulate
from greentrain.sim.fcache import HourlyForecastCache, shared_per_hour

pytestmark = pytest.mark.timeout(120)

TRACE = Path(__file__).resolve().parents[2] / "greentrain" / "data" / "carbon" / "GB_2022_hourly.csv"


class Counting(Forecaster):
    """The real forecaster, counting its calls; ``horizon_independent`` as the class says."""

    def __init__(self, shareable: bool) -> None:
        super().__init__()
        self.horizon_independent = shareable
        self.calls = 0

    def forecast(self, history, now, horizon_h=72):
        self.calls += 1
        return super().forecast(history, now, horizon_h)


def _run(forecaster):
    points = load_trace(TRACE)
    trace = TraceIndex(points[: 24 * 40], "GB_2022")
    first = points[24 * 28].start
    starts = [first + timedelta(hours=6 * i) for i in range(8)]  # 6 h apart, 24 h deadlines: overlapping
    job = SimJob(work_s=8 * 3600, deadline_s=24 * 3600, modes=(Mode(1.0, 1000.0),))
    return simulate(trace, starts, job, ForecastOptimalPolicy(), forecaster)


def test_shared_forecasts_give_identical_runs_with_fewer_calls() -> None:
    direct, shared = Counting(shareable=False), Counting(shareable=True)
    plain, cached = _run(direct), _run(shared)
    assert [r.policy.schedule for r in cached] == [r.policy.schedule for r in plain]
    assert [r.policy.emissions_g for r in cached] == [r.policy.emissions_g for r in plain]
    assert shared.calls < 0.6 * direct.calls  # 8 starts whose 24 h windows overlap by 18 h


def test_only_declared_forecasters_are_wrapped_and_longer_horizons_are_recomputed() -> None:
    assert shared_per_hour(Counting(shareable=False)).__class__ is Counting
    inner = Counting(shareable=True)
    cache = shared_per_hour(inner)
    assert isinstance(cache, HourlyForecastCache)
    history = load_trace(TRACE)[: 24 * 30]
    now = history[-1].start
    short = cache.forecast(history, now, 6)
    longer = cache.forecast(history, now, 24)  # more than was asked before: a new call
    again = cache.forecast(history, now, 12)  # a prefix of what is held: no call
    assert inner.calls == 2
    assert longer[:6] == short and again == longer[:12] == Forecaster().forecast(history, now, 12)
    earlier = history[-2].start
    assert len(cache.forecast(history[:-1], earlier, 3)) == 3  # fetched at the longest horizon seen (24 h)
    assert len(cache.forecast(history[:-1], earlier, 24)) == 24 and inner.calls == 3
