"""A forecast read through its own record: the measured bias by hours ahead taken out before planning.

A forecaster (or a provider) that runs low 12 h ahead in one zone makes every
wait look better there than it is, and a plan on it keeps waiting for a clean
hour that is not coming. The engine (and the simulator) measure each
signal's signed error by hours ahead (``signals/forecast/liveskill.py``) and hand the
part that stands out of the noise to the policy as
``Snapshot.forecast_bias_g_per_kwh``; ``calibrated`` subtracts it from the
forecast. What is left is the forecast's expected value, which is what
emissions add up to: a planner that minimises expected emissions plans on it,
and the wait gate (``policies/worth.py``) weighs its saving. Pure.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from greentrain.policies.base import Snapshot

__all__ = ["calibrated", "hours_ahead"]

_HOUR = timedelta(hours=1)


def hours_ahead(start: datetime, now: datetime) -> int:
    """Index of the horizon a point starting at ``start`` has at ``now`` (0: the next hour; -1: now's hour)."""
    return int((start - now.replace(minute=0, second=0, microsecond=0)) // _HOUR) - 1


def calibrated(snapshot: Snapshot, now: datetime) -> Snapshot:
    """``snapshot`` with each forecast point less the measured bias at its horizon (never below 0); itself when
    no bias is measured. Points of the current hour and past the last measured horizon stay as they are."""
    bias = snapshot.forecast_bias_g_per_kwh
    if not bias or not any(bias):
        return snapshot
    points = []
    for point in snapshot.forecast:
        h = hours_ahead(point.start, now)
        if 0 <= h < len(bias) and bias[h]:
            point = replace(point, intensity_g_per_kwh=max(0.0, point.intensity_g_per_kwh - bias[h]))
        points.append(point)
    return replace(snapshot, forecast=tuple(points))
