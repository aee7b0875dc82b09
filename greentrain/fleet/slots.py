"""The planner's time grid: slot 0 runs from now to the next whole hour, then whole-hour slots.

With ``coarse=True`` (the rolling form) the slots grow with distance: hourly
for the first day, two hours wide up to the third, four hours beyond. Only
slot 0 is acted on and the plan is re-solved at every decision, so the far
future needs less detail, and there the forecast has less to give: it is
mostly the daily profile. This keeps a week-long plan of hundreds of jobs
small enough to solve every few minutes of simulated time. ``stretch`` widens
every coarse slot after the first hours by that factor (the planner does so
for very large queues: thousands of jobs).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SlotGrid"]

_EPS_H = 1e-9
_WIDTHS = ((24, 1), (72, 2))
"""(up to this many hours from now, slot width in hours); 4-hour slots beyond the last."""
_FAR_WIDTH_H = 4
_HOURLY_H = 6
"""Hours ahead kept hourly whatever the stretch."""


class SlotGrid:
    """Slot boundaries from ``now_h`` to at least ``end_h`` (plan hours)."""

    def __init__(self, now_h: float, end_h: float, *, coarse: bool = False, stretch: int = 1) -> None:
        first = math.floor(now_h + _EPS_H) + 1
        last = max(first, math.ceil(end_h - _EPS_H))
        self.now_h = now_h
        self.first_hour = first - 1
        """The whole hour containing now: index 0 of the intensity arrays."""
        edges = [now_h, float(first)]
        while edges[-1] < last:
            width = _width(edges[-1] - now_h, stretch) if coarse else 1
            edges.append(float(min(last, edges[-1] + width)) if coarse else edges[-1] + 1.0)
        self.edges = np.array(edges)
        self.lengths = np.diff(self.edges)

    @property
    def count(self) -> int:
        return self.lengths.size

    @property
    def hours(self) -> int:
        """Whole hours the grid spans, from the hour containing now."""
        return int(round(self.edges[-1])) - self.first_hour

    def overlap(self, end_h: float) -> np.ndarray:
        """Hours of each slot before ``end_h``."""
        return np.clip(np.minimum(self.edges[1:], end_h) - self.edges[:-1], 0.0, None)

    def slots_before(self, end_h: float) -> int:
        """Number of slots that start before ``end_h``."""
        return int(np.searchsorted(self.edges[:-1], end_h - _EPS_H, side="left"))

    def mean_per_slot(self, hourly: np.ndarray) -> np.ndarray:
        """Mean of ``hourly`` (index 0 = the hour containing now) over each slot."""
        cumulative = np.concatenate([[0.0], np.cumsum(hourly[: self.hours])])
        bounds = np.rint(self.edges[1:] - self.first_hour).astype(int)
        starts = np.concatenate([[0], bounds[:-1]])
        return (cumulative[bounds] - cumulative[starts]) / (bounds - starts)


def _width(ahead_h: float, stretch: int) -> int:
    if ahead_h < _HOURLY_H:
        return 1
    for limit_h, width in _WIDTHS:
        if ahead_h < limit_h:
            return width * stretch
    return _FAR_WIDTH_H * stretch
