"""Replaying forecasts as issued: the latest issue at or before each decision, own forecaster past its end and in
gaps, skill-weighted blending, and causality (changing the future changes no earlier decision)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from greentrain.policies import CarbonAwarePolicy
from greentrain.policies.slot_planner import Mode
from greentrain.signals.archive.replay import ArchiveForecaster
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.archive.issued import IssuedForecasts
from greentrain.signals.trace import load_trace
from greentrain.sim import SimJob, TraceIndex, simulate_run
from greentrain.sim.fcache import HourlyForecastCache
from tests.policies.helpers import HOUR, PersistenceForecaster, points
from tests.sim.test_replay import Recording, _perturbed

pytestmark = pytest.mark.timeout(120)


def archive_rows(trace, *, every_h: int = 1, horizon_h: int = 48, spread: float = 0.05, seed: int = 1,
                 skip: range = range(0), issued_shift_s: int = 0):
    """A forecast issued at each ``every_h``-th hour of ``trace``: its actual future × log-normal noise whose
    spread grows with the horizon (skipping the issue hours in ``skip``: an archive gap)."""
    rng = np.random.default_rng(seed)
    issued, target, value = [], [], []
    for t in range(0, len(trace) - 1, every_h):
        if t in skip:
            continue
        for h in range(1, min(horizon_h, len(trace) - 1 - t) + 1):
            issued.append(int(trace[t].start.timestamp()) + issued_shift_s)
            target.append(int(trace[t + h].start.timestamp()))
            value.append(trace[t + h].intensity_g_per_kwh * float(np.exp(spread * np.sqrt(h / 24) * rng.normal())))
    return np.array(issued), np.array(target), np.array(value)


def test_the_latest_issue_at_or_before_now_is_used_then_the_own_forecaster():
    trace = points([100, 200, 300, 400, 500, 600, 700, 800])
    issued = IssuedForecasts(np.array([int(trace[0].start.timestamp())] * 2 + [int(trace[2].start.timestamp()) + 1]),
                             np.array([int(trace[1].start.timestamp()), int(trace[2].start.timestamp()),
                                       int(trace[4].start.timestamp())]),
                             np.array([11.0, 12.0, 99.0]), provider="p", zone="XX")
    forecaster = ArchiveForecaster(issued, PersistenceForecaster(), blend=False)
    at_0 = forecaster.forecast(trace[:1], trace[0].start, 3)
    assert [p.intensity_g_per_kwh for p in at_0] == [11.0, 12.0, 100.0]  # then the own (persistence) forecast
    assert [p.provider for p in at_0] == ["p", "p", "greentrain"]
    # At 02:00 the 02:00:01 issue is one second too late, and the 00:00 one says nothing past 02:00: the own
    # forecaster answers alone, counted as a gap; at 00:00 it only extended the archived forecast.
    at_2 = forecaster.forecast(trace[:3], trace[2].start, 2)
    assert [p.intensity_g_per_kwh for p in at_2] == [300.0, 300.0]
    assert (forecaster.hours, forecaster.fallback_hours, forecaster.extended_hours) == (2, 1, 1)
    at_3 = forecaster.forecast(trace[:4], trace[3].start, 2)
    assert [p.intensity_g_per_kwh for p in at_3] == [99.0, 400.0]
    stale = ArchiveForecaster(issued, PersistenceForecaster(), blend=False, max_age_h=1)
    assert [p.provider for p in stale.forecast(trace[:7], trace[6].start, 1)] == ["greentrain"]
    assert stale.fallback_hours == 1  # the archive's last issue is older than an hour: a gap


@pytest.fixture(scope="module")
def slice_de(carbon_trace):
    return load_trace(carbon_trace("DE-LU_2022_hourly.csv"))[24 * 60: 24 * 100]


def test_a_gap_in_the_archive_falls_back_to_the_trace_only_forecaster(slice_de):
    trace = slice_de[: 24 * 12]
    gap = range(24 * 10 - 3, 24 * 10 + 12)  # last issue 3 h before the first decision, then 15 h without
    issued = IssuedForecasts(*archive_rows(trace, skip=gap), provider="p", zone="DE")
    forecaster = ArchiveForecaster(issued, Forecaster(), blend=False)
    for t in range(24 * 10, 24 * 11):
        forecaster.forecast(trace[: t + 1], trace[t].start, 12)
    # Within 6 h of the last issue its forecast is used; from 7 h on until issues resume (9 hours): a gap.
    assert forecaster.hours == 24 and forecaster.fallback_hours == 9


def test_a_forecast_published_once_a_day_is_no_gap_at_noon(slice_de):
    trace = slice_de[: 24 * 12]
    issued = IssuedForecasts(*archive_rows(trace, every_h=24, horizon_h=40), provider="p", zone="DE")
    assert issued.default_max_age_s() == 2 * 86400.0
    forecaster = ArchiveForecaster(issued, PersistenceForecaster(), blend=False)
    for t in range(24 * 10, 24 * 11):
        forecaster.forecast(trace[: t + 1], trace[t].start, 12)
    assert forecaster.fallback_hours == 0 and forecaster.hours == 24


def test_skill_weights_trust_a_good_provider_and_discount_a_bad_one(slice_de):
    trace = slice_de
    now = trace[24 * 32].start
    own = HourlyForecastCache(Forecaster())  # one own forecast per hour, shared by both
    good = IssuedForecasts(*archive_rows(trace, spread=0.02), provider="good", zone="DE")
    bad = IssuedForecasts(*archive_rows(trace, spread=1.5), provider="bad", zone="DE")
    window = 24 * 4
    w_good = ArchiveForecaster(good, own, skill_window_h=window)._weights_at(trace[: 24 * 32 + 1], now)
    w_bad = ArchiveForecaster(bad, own, skill_window_h=window)._weights_at(trace[: 24 * 32 + 1], now)
    assert w_good[:48].min() > 0.9
    assert w_bad[24:48].max() < 0.5  # far ahead, greentrain's own forecaster beats a wild one
    blended = ArchiveForecaster(bad, own, skill_window_h=window).forecast(trace[: 24 * 32 + 1], now, 48)
    assert {p.provider for p in blended[24:]} == {"bad+greentrain"}


def test_a_blended_forecast_past_the_skill_span_extends_with_the_own_forecaster(slice_de):
    # A plan whose deadline lies beyond the 72 h the skill is measured on (a fleet's, or a 96 h job's).
    trace = slice_de
    now = trace[24 * 32].start
    own = HourlyForecastCache(Forecaster())
    issued = IssuedForecasts(*archive_rows(trace, spread=0.02), provider="p", zone="DE")
    forecaster = ArchiveForecaster(issued, own, skill_window_h=24 * 4)
    long = forecaster.forecast(trace[: 24 * 32 + 1], now, 100)
    assert len(long) == 100
    assert {p.provider for p in long[48:]} == {"greentrain"}  # the provider's 48 h end there
    mine = own.forecast(trace[: 24 * 32 + 1], now, 100)
    assert [p.intensity_g_per_kwh for p in long[48:]] == pytest.approx([p.intensity_g_per_kwh for p in mine[48:]])


def _decisions(trace, issued_rows, start, cut, job):
    policy = Recording(CarbonAwarePolicy())
    issued = IssuedForecasts(*issued_rows, provider="p", zone="DE")
    simulate_run(TraceIndex(trace), start, job, policy, ArchiveForecaster(issued, Forecaster(), skill_window_h=48))
    return ([(now, s, d) for now, s, d in policy.calls if now <= cut], [d for now, _, d in policy.calls if now > cut])


def _future_changed(rows, cut_s, seed=5):
    """Forecasts issued after ``cut_s`` redrawn, and one more issue a second after it."""
    issued, target, value = rows
    rng = random.Random(seed)
    later = issued > cut_s
    value = np.where(later, value * np.array([rng.uniform(0.2, 3) for _ in value]), value)
    extra = target[later][:48]
    return (np.concatenate([issued, np.full(extra.size, cut_s + 1)]), np.concatenate([target, extra]),
            np.concatenate([value, np.full(extra.size, 1.0)]))


@pytest.mark.parametrize("leak_s", [0, -3 * 3600])
def test_changing_the_future_changes_no_earlier_decision(slice_de, leak_s):
    """Trace values and archived issues after the cut are changed; the decisions up to it must not move. With
    ``leak_s`` < 0 every forecast is stamped 3 h before it was made: the same check must then catch it."""
    trace = slice_de
    start = trace[24 * 30].start
    cut = start + 10 * HOUR
    cut_s = int(cut.timestamp())
    job = SimJob(work_s=12 * 3600, deadline_s=36 * 3600, modes=(Mode(1.0, 1000.0),), resume_overhead_s=300,
                 waiting_power_w=150.0)
    rows = archive_rows(trace, issued_shift_s=leak_s)
    true_rows = archive_rows(trace)
    changed = _future_changed(true_rows, cut_s)
    if leak_s:
        changed = (changed[0] + leak_s, changed[1], changed[2])
    before_a, after_a = _decisions(trace, rows, start, cut, job)
    before_b, after_b = _decisions(_perturbed(trace, cut), changed, start, cut, job)
    if leak_s:
        assert before_a != before_b  # a forecast read before it was issued is caught
        return
    assert len(before_a) == 11 and before_a == before_b
    assert after_a != after_b  # the change does matter later on


def test_horizon_independent_values(slice_de):
    """The value h hours ahead does not depend on the horizon asked (the simulator shares forecasts per hour)."""
    trace = slice_de
    issued = IssuedForecasts(*archive_rows(trace, horizon_h=24), provider="p", zone="DE")
    own = HourlyForecastCache(Forecaster())
    now = trace[24 * 30].start
    long = ArchiveForecaster(issued, own, skill_window_h=48).forecast(trace[: 24 * 30 + 1], now, 40)
    short = ArchiveForecaster(issued, own, skill_window_h=48).forecast(trace[: 24 * 30 + 1], now, 30)
    assert [replace(p) for p in long[:30]] == short
    assert {p.provider for p in long[24:]} == {"greentrain"}  # past the 24 h the archive forecast
    assert all(p.start - q.start == timedelta(hours=1) for p, q in zip(long[1:], long))
