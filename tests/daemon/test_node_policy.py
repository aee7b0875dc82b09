"""Node-wide policy: cap while dirty, keep the last decision (and show staleness) when the signal fails."""

from __future__ import annotations

from collections.abc import Callable

from datetime import UTC, datetime
from pathlib import Path

import pytest

from greentrain.clock import FrozenClock
from greentrain.daemon.config import NodePolicyConfig
from greentrain.daemon.nodepolicy import (
    NodePolicyRunner,
    dirty_grid_cap,
    trace_intensity_fn,
)
from greentrain.errors import SignalError
from greentrain.signals.trace import load_trace

pytestmark = pytest.mark.timeout(20)
CONFIG = NodePolicyConfig(dirty_above_g_per_kwh=200.0, dirty_power_limit_w=180.0, trace=Path("x"))


def test_rule() -> None:
    assert dirty_grid_cap(250.0, CONFIG) == 180.0
    assert dirty_grid_cap(200.0, CONFIG) is None


def test_runner_follows_a_real_trace_and_survives_signal_loss(carbon_trace: Callable[[str], Path]) -> None:
    points = load_trace(carbon_trace("GB_2022_hourly.csv"))
    dirty = next(p for p in points if p.intensity_g_per_kwh > 200)
    clean = next(p for p in points if p.intensity_g_per_kwh < 100)
    clock = FrozenClock(dirty.start)
    applied: list[tuple[float | None, dict]] = []
    runner = NodePolicyRunner(CONFIG, trace_intensity_fn(points, clock), lambda cap, st: applied.append((cap, st)), clock)
    assert runner.tick() == 180.0
    clock.advance((clean.start - dirty.start).total_seconds())
    assert runner.tick() is None
    clock.advance(-(clean.start - dirty.start).total_seconds())
    assert runner.tick() == 180.0
    # beyond the trace: the signal fails, the cap stays, and the status says how stale it is
    clock.advance((points[-1].end - dirty.start).total_seconds() + 3600)
    assert runner.tick() == 180.0
    cap, status = applied[-1]
    assert cap == 180.0 and status["stale"] is True and status["age_s"] > 0
    assert "outside" in status["last_error"]


def test_runner_without_any_good_reading_sets_no_cap() -> None:
    def broken() -> float:
        raise SignalError("provider down")

    seen: list[float | None] = []
    runner = NodePolicyRunner(CONFIG, broken, lambda cap, st: seen.append(cap), FrozenClock(datetime(2026, 1, 1, tzinfo=UTC)))
    assert runner.tick() is None and seen == [None]
