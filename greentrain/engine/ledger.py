"""Emissions accounting: energy of each interval × the intensity of that interval.

The ledger remembers the intensity points the engine has seen (actual values
as they arrive, forecasts until actuals replace them), so it can price a step
at the time it ran *and* at the time it would have run under run-now at
default settings — the counterfactual behind ``emissions_avoided_g``. Under
run-now the job starts at its first start and never pauses, so a step that
follows ``running_s`` seconds of earlier running would have run at
``first_start + running_s``; that time is never later than now, so the ledger
has (or had) its intensity.

Energy spent while no intensity is known at all (no signal configured, an
unknown zone, a provider that never answered) is *unpriced*: its emissions
are unknown, reported as None with the reason, never as 0 g.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime

from greentrain.signals.base import IntensityPoint, Kind
from greentrain.units import J_PER_KWH

__all__ = ["CarbonLedger", "LedgerEntry", "J_PER_KWH"]  # J_PER_KWH: re-exported from greentrain.units

_MAX_POINTS = 20_000


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """Emissions of one step (or idle interval) and what run-now would have emitted.

    ``emissions_g`` is None when no intensity was known for the interval (the
    energy is then unpriced); the counters treat such an entry as adding 0 g.
    """

    energy_j: float
    emissions_g: float | None
    counterfactual_g: float

    @property
    def avoided_g(self) -> float:
        return self.counterfactual_g - (self.emissions_g or 0.0)

    @property
    def priced(self) -> bool:
        return self.emissions_g is not None


class CarbonLedger:
    """Intensity lookup by time plus running totals."""

    def __init__(self) -> None:
        self._starts: list[datetime] = []
        self._points: list[IntensityPoint] = []
        self.energy_j = 0.0
        self.emissions_g = 0.0
        self.counterfactual_g = 0.0
        self.unpriced_energy_j = 0.0
        """Energy spent while no intensity was known: its emissions are unknown."""

    @property
    def avoided_g(self) -> float:
        """Emissions avoided so far versus run-now at default settings, grams (priced energy only)."""
        return self.counterfactual_g - self.emissions_g

    @property
    def emissions_known(self) -> bool:
        """Whether every joule spent so far was priced."""
        return self.unpriced_energy_j <= 0.0

    def total_emissions_g(self) -> float | None:
        """Emissions so far, or None when part of the energy could not be priced."""
        return self.emissions_g if self.emissions_known else None

    def total_avoided_g(self) -> float | None:
        """Avoided emissions so far, or None when part of the energy could not be priced."""
        return self.avoided_g if self.emissions_known else None

    def restore(self, *, energy_j: float, emissions_g: float, counterfactual_g: float,
                unpriced_energy_j: float) -> None:
        """Totals an earlier process of the same job spent (a relaunch continues them)."""
        self.energy_j, self.emissions_g = energy_j, emissions_g
        self.counterfactual_g, self.unpriced_energy_j = counterfactual_g, unpriced_energy_j

    def observe(self, point: IntensityPoint) -> None:
        """Remember ``point``; an actual value replaces a forecast of the same interval."""
        i = bisect.bisect_left(self._starts, point.start)
        if i < len(self._starts) and self._starts[i] == point.start:
            old = self._points[i]
            if point.kind != Kind.FORECAST or old.kind == Kind.FORECAST:
                self._points[i] = point
            return
        self._starts.insert(i, point.start)
        self._points.insert(i, point)
        if len(self._points) > _MAX_POINTS:  # keep memory bounded on very long jobs
            del self._starts[0], self._points[0]

    def observe_many(self, points: list[IntensityPoint] | tuple[IntensityPoint, ...]) -> None:
        for point in points:
            self.observe(point)

    def intensity_at(self, t: datetime) -> float | None:
        """Intensity (g/kWh) of the interval containing ``t``; else the latest point before it; else None."""
        i = bisect.bisect_right(self._starts, t) - 1
        if i >= 0:
            return self._points[i].intensity_g_per_kwh
        return self._points[0].intensity_g_per_kwh if self._points else None

    def record(self, energy_j: float, at: datetime, counterfactual_at: datetime | None) -> LedgerEntry:
        """Add ``energy_j`` spent at ``at``; run-now would have spent it at ``counterfactual_at``.

        ``counterfactual_at=None`` means run-now would not have spent it at all
        (idle power during a pause): it then counts against the avoided total.
        """
        energy_j = max(0.0, energy_j)
        actual = self.intensity_at(at)
        if actual is None and energy_j > 0.0:  # nothing known to price it with: unknown, not 0 g
            self.energy_j += energy_j
            self.unpriced_energy_j += energy_j
            return LedgerEntry(energy_j, None, 0.0)
        emissions_g = energy_j / J_PER_KWH * actual if actual is not None else 0.0
        counterfactual_g = 0.0
        if counterfactual_at is not None:
            cf = self.intensity_at(counterfactual_at)
            counterfactual_g = energy_j / J_PER_KWH * cf if cf is not None else emissions_g
        self.energy_j += energy_j
        self.emissions_g += emissions_g
        self.counterfactual_g += counterfactual_g
        return LedgerEntry(energy_j, emissions_g, counterfactual_g)
