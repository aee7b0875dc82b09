"""Forecasts as issued, indexed for "what did this source say at that moment?".

``IssuedForecasts`` holds one series (a provider and a zone) from the archive
or the long CSV format. ``table(origins, horizon_h)`` answers, for each
moment in ``origins``, what the latest forecast issued at or before it said
for each of the next ``horizon_h`` hours: the view a planner had then. A
forecast older than ``max_age_s`` at that moment counts as none (an archive
gap). Values are hourly (targets inside one hour are averaged); a target
hour that starts before its issue time is left out, so nothing is ever read
before it existed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Counts", "IssuedForecasts", "MAX_TARGET_H", "MIN_MAX_AGE_S"]

MAX_TARGET_H = 14 * 24
"""Targets further than this after their issue are dropped (no provider forecasts two weeks ahead)."""
MIN_MAX_AGE_S = 6 * 3600.0
"""The shortest default max age: a provider that publishes hourly or more often, silent for 6 hours, has a gap."""


@dataclass(frozen=True, slots=True)
class Counts:
    """What building the index left out."""

    rows: int
    issues: int
    partial_hour: int
    """Targets in the hour their forecast was issued (before the issue time)."""
    too_far: int
    """Targets more than ``MAX_TARGET_H`` after their issue."""


class IssuedForecasts:
    """One series' forecasts as issued: per issue time, hourly values for the hours after it."""

    def __init__(self, issued_s: np.ndarray, target_s: np.ndarray, value: np.ndarray, *, provider: str,
                 zone: str) -> None:
        """Rows as arrays in any order: issue time and target start (unix seconds), value (g/kWh)."""
        self.provider, self.zone = provider, zone
        issued_s = np.asarray(issued_s, dtype=np.int64)
        target_h = np.asarray(target_s, dtype=np.int64) // 3600
        value = np.asarray(value, dtype=np.float64)
        issues, inverse = np.unique(issued_s, return_inverse=True)
        self.issued_s = issues
        """Distinct issue times, ascending (unix seconds)."""
        self._first_h = -(-issues // 3600)  # the first whole hour at or after each issue
        k = target_h - self._first_h[inverse]
        partial = k < 0
        too_far = k >= MAX_TARGET_H
        keep = ~partial & ~too_far
        width = int(k[keep].max()) + 1 if keep.any() else 1
        total = np.zeros((issues.size, width))
        count = np.zeros((issues.size, width))
        np.add.at(total, (inverse[keep], k[keep]), value[keep])
        np.add.at(count, (inverse[keep], k[keep]), 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            self._values = np.where(count > 0, total / np.maximum(count, 1.0), np.nan)
        self.counts = Counts(int(value.size), int(issues.size), int(partial.sum()), int(too_far.sum()))

    @property
    def empty(self) -> bool:
        return self.issued_s.size == 0

    @property
    def horizon_h(self) -> int:
        """The furthest target after an issue's first whole hour, in hours."""
        return int(self._values.shape[1])

    def default_max_age_s(self) -> float:
        """How old the latest forecast may be before it counts as a gap: 6 h, or twice the usual (median) time
        between two issues when that is longer (a day-ahead forecast published once a day is not a gap at noon)."""
        if self.issued_s.size < 2:
            return MIN_MAX_AGE_S
        return max(MIN_MAX_AGE_S, 2.0 * float(np.median(np.diff(self.issued_s))))

    def latest(self, when_s: int) -> int | None:
        """Index of the latest issue at or before ``when_s`` (None if there is none)."""
        i = int(np.searchsorted(self.issued_s, when_s, side="right")) - 1
        return None if i < 0 else i

    def table(self, origins_s: np.ndarray, horizon_h: int, *, max_age_s: float = float("inf")) -> np.ndarray:
        """(origins × horizon_h) values: row r, column h - 1 is what the latest forecast issued at or before
        ``origins_s[r]`` (and at most ``max_age_s`` before it) said for the hour starting h hours after the
        hour containing ``origins_s[r]``; NaN where it said nothing."""
        origins = np.asarray(origins_s, dtype=np.int64)
        out = np.full((origins.size, horizon_h), np.nan)
        if self.empty or origins.size == 0:
            return out
        issue = np.searchsorted(self.issued_s, origins, side="right") - 1
        ok = issue >= 0
        ok &= (origins - self.issued_s[np.maximum(issue, 0)]) <= max_age_s
        rows = np.flatnonzero(ok)
        if rows.size == 0:
            return out
        chosen = issue[rows]
        k = (origins[rows] // 3600 - self._first_h[chosen])[:, None] + np.arange(1, horizon_h + 1)[None, :]
        inside = k < self.horizon_h
        values = self._values[chosen[:, None], np.minimum(k, self.horizon_h - 1)]
        out[rows] = np.where(inside, values, np.nan)
        return out

    def at(self, when_s: int, horizon_h: int, *, max_age_s: float = float("inf")) -> np.ndarray:
        """``table`` for one moment: the next ``horizon_h`` hourly values (NaN where not forecast)."""
        return self.table(np.array([when_s]), horizon_h, max_age_s=max_age_s)[0]
