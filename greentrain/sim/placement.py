"""Where a single job runs next, when it may run in several grid zones.

A job that can run in several zones (partitions or regions on different
grids) may change zone only where it stands still: before its first start
(nothing to move: free) or at a pause, where resuming elsewhere costs the
migration overhead (checkpoint transfer and restart: running time at full
power without progress, longer than a resume in place). At such a point each
zone's rest of the run is priced on that zone's forecast, as the policy would
see it there: the overhead, then the remaining work in the cleanest hours
before the deadline. The job moves only when the cheapest zone saves more
than ``min_saving_frac`` of staying, net of the overhead's time and energy,
and only to a zone where the rest (overhead counted, at the pessimistic rate)
still fits before the deadline. Causal: it sees the actual intensity of this
hour and forecasts, nothing later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from greentrain.policies.slot_planner import J_PER_KWH
from greentrain.signals.base import IntensityPoint

__all__ = ["Placement", "ZoneOutlook", "choose_zone", "rest_emissions_g"]

_HOUR_S = 3600.0


@dataclass(frozen=True, slots=True)
class ZoneOutlook:
    """What is known now about running the rest of the job in one zone."""

    zone: str
    now: IntensityPoint
    """This hour's interval in the zone's trace (its actual intensity is known now)."""
    forecast: Sequence[IntensityPoint]
    """The zone's forecast for the hours after ``now``."""
    overhead_s: float
    """Time without progress before work goes on here: 0 fresh, the resume overhead where the job last ran,
    the migration overhead elsewhere."""


@dataclass(frozen=True, slots=True)
class Placement:
    """The zone chosen and what each zone was expected to cost (None: the rest does not fit there)."""

    zone: str
    expected_g: dict[str, float | None]


def rest_emissions_g(outlook: ZoneOutlook, *, now: datetime, deadline: datetime, need_s: float,
                     power_w: float) -> float | None:
    """Expected emissions of the rest in ``outlook``'s zone: ``need_s`` of running at ``power_w`` in the
    cleanest forecast hours before ``deadline``, after the overhead at their mean intensity; None when the
    overhead and ``need_s`` do not fit between ``now`` and the deadline."""
    hours: list[tuple[float, float]] = []  # (seconds usable, g/kWh)
    for point in (outlook.now, *outlook.forecast):
        begin, end = max(point.start, now), min(point.end, deadline)
        if end > begin:
            hours.append(((end - begin).total_seconds(), point.intensity_g_per_kwh))
    if sum(s for s, _ in hours) + 1e-6 < need_s + outlook.overhead_s:
        return None
    left_s, work_g_s = need_s, 0.0  # g/kWh x s, over the chosen hours
    for seconds, intensity in sorted(hours, key=lambda h: h[1]):
        take = min(seconds, left_s)
        work_g_s += take * intensity
        left_s -= take
        if left_s <= 1e-9:
            break
    mean = work_g_s / need_s if need_s > 0 else outlook.now.intensity_g_per_kwh
    return power_w * (work_g_s + outlook.overhead_s * mean) / J_PER_KWH


def choose_zone(outlooks: Sequence[ZoneOutlook], stay: str, *, now: datetime, deadline: datetime,
                need_s: float, power_w: float, min_saving_frac: float = 0.0) -> Placement:
    """The zone to (re)start in: ``stay`` unless another saves more than ``min_saving_frac`` of staying net
    of its overhead (and fits the deadline); the cheapest that fits when the rest no longer fits at ``stay``.
    ``need_s``: the rest's running time at the pessimistic rate, overhead excluded."""
    expected = {o.zone: rest_emissions_g(o, now=now, deadline=deadline, need_s=need_s, power_w=power_w)
                for o in outlooks}
    fits = {zone: grams for zone, grams in expected.items() if grams is not None}
    if not fits:
        return Placement(stay, expected)
    best = min(fits, key=lambda zone: (fits[zone], zone != stay))
    here = fits.get(stay)
    if here is None or here - fits[best] > min_saving_frac * here + 1e-12:
        return Placement(best, expected)
    return Placement(stay, expected)
