"""Builders shared by the policy and simulator tests: hourly points, snapshots, test forecasters."""

from __future__ import annotations

from collections.abc import Sequence
import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from greentrain.policies.slot_planner import J_PER_KWH, StartState
from greentrain.signals.base import IntensityPoint, Kind

T0 = datetime(2022, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def points(values: Sequence[float], start: datetime = T0, kind: Kind = Kind.ACTUAL) -> list[IntensityPoint]:
    """Hourly points with the given intensities from ``start``."""
    return [
        IntensityPoint(start=start + i * HOUR, end=start + (i + 1) * HOUR, intensity_g_per_kwh=float(v),
                       kind=kind, provider="test", zone="XX")
        for i, v in enumerate(values)
    ]


class PerfectTestForecaster:
    """Test double: the true future of a fixed trace (non-causal on purpose)."""

    def __init__(self, trace: Sequence[IntensityPoint]) -> None:
        self.trace = list(trace)

    def forecast(self, history, now, horizon_h=72):
        later = [p for p in self.trace if p.start > now]
        return [replace(p, kind=Kind.FORECAST) for p in later[:horizon_h]]


class PersistenceForecaster:
    """Test double: every future hour equals the last known one (causal)."""

    def forecast(self, history, now, horizon_h=72):
        known = [p for p in history if p.start <= now]
        if not known:
            return []
        last = known[-1]
        return [replace(last, start=last.end + i * HOUR, end=last.end + (i + 1) * HOUR, kind=Kind.FORECAST)
                for i in range(horizon_h)]


def brute_force(values, work_s, modes, overhead_s, waiting_w=0.0):
    """Least grams over every run/pause/mode choice per hourly slot: the planner's reference (waiting
    after the first start costs ``waiting_w``; a resume costs ``overhead_s`` at 1 kW)."""
    best = None
    for choice in itertools.product([None, *modes], repeat=len(values)):
        remaining, state, grams = work_s, StartState.FRESH, 0.0
        for value, mode in zip(values, choice):
            if remaining <= 1e-9:
                break
            if mode is None:
                if state != StartState.FRESH:
                    grams += waiting_w * 3600.0 * value / J_PER_KWH
                    state = StartState.PAUSED
                continue
            over = overhead_s if state == StartState.PAUSED else 0.0
            run = min(3600.0, over + remaining / mode.speed)
            grams += (1000.0 * over + mode.power_w * (run - over)) * value / J_PER_KWH
            remaining -= mode.speed * (run - over)
            state = StartState.RUNNING
        if remaining <= 1e-9 and (best is None or grams < best):
            best = grams
    return best
