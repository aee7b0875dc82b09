"""Choose when (and where) a batch job should start to emit the least carbon.

The job needs ``duration_s`` of running time and must finish by ``deadline``.
For each candidate start we take the time-weighted mean forecast intensity over
[start, start + duration) and keep the lowest. Intensity is piecewise constant
(one value per forecast interval), so the optimum always lies at ``now``, at the
latest feasible start, or where the window's start or end meets an interval
boundary: those are the only candidates we evaluate, exactly.

With several places (cluster/partition, each on its own grid zone), the same
search runs per place and the lowest expected emissions win. This module is
pure: no clock, no files, no Slurm.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError, DeadlineError
from greentrain.signals.base import IntensityPoint, Kind

__all__ = ["Window", "Place", "PlacementPlan", "window_mean", "best_window", "plan_placement", "shift_points"]

_MIN_COVERAGE = 0.5
"""A window must be at least this much covered by the forecast to be ranked (else it is a guess)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """A candidate running interval and its forecast mean intensity."""

    start: datetime
    end: datetime
    mean_intensity_g_per_kwh: float | None
    """Time-weighted mean over the covered part; None when the forecast covers none of it."""
    coverage: float
    """Fraction of [start, end) that the forecast covers (0..1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """Where a job can run: an optional Slurm cluster and partition, on a grid zone."""

    zone: str
    cluster: str | None = None
    partition: str | None = None

    @classmethod
    def parse(cls, text: str) -> Place:
        """Parse ``[CLUSTER:]PARTITION=ZONE`` (``CLUSTER:=ZONE`` names a cluster only)."""
        match = re.fullmatch(r"\s*(?:([\w.-]*):)?([\w.-]*)=([\w.-]+)\s*", text)
        if match is None or not (match.group(1) or match.group(2)):
            raise ConfigError(f"--place: {text!r} is not [CLUSTER:]PARTITION=ZONE (e.g. 'gpu=GB' or 'eu:gpu=DE-LU')")
        return cls(zone=match.group(3), cluster=match.group(1) or None, partition=match.group(2) or None)

    @property
    def spec(self) -> str:
        """``[CLUSTER:]PARTITION=ZONE``, as ``parse`` reads it."""
        return f"{self.cluster + ':' if self.cluster else ''}{self.partition or ''}={self.zone}"

    @property
    def label(self) -> str:
        """Human-readable name, e.g. 'eu:gpu (DE-LU)'."""
        where = ":".join(p for p in (self.cluster, self.partition) if p) or "default"
        return f"{where} ({self.zone})"

    def sbatch_args(self) -> list[str]:
        """The sbatch options that send a job here."""
        args = []
        if self.cluster:
            args.append(f"--clusters={self.cluster}")
        if self.partition:
            args.append(f"--partition={self.partition}")
        return args


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementPlan:
    """The chosen place and window, and the run-now alternative for comparison."""

    place: Place
    window: Window
    run_now: Window
    """Starting immediately at the same place."""
    expected_emissions_g: float | None = None
    """mean intensity x energy, when the job's power draw is known."""

    @property
    def saving_fraction(self) -> float | None:
        """Relative intensity reduction versus starting now (0.3 = 30 % less)."""
        chosen, now = self.window.mean_intensity_g_per_kwh, self.run_now.mean_intensity_g_per_kwh
        if chosen is None or not now:
            return None
        return 1.0 - chosen / now


def window_mean(points: Sequence[IntensityPoint], start: datetime, end: datetime) -> Window:
    """Time-weighted mean intensity of ``points`` over [start, end)."""
    total_s = (end - start).total_seconds()
    if total_s <= 0:
        raise ConfigError(f"window: end {end.isoformat()} must be after start {start.isoformat()}")
    weighted = covered_s = 0.0
    for point in points:
        overlap_s = (min(end, point.end) - max(start, point.start)).total_seconds()
        if overlap_s > 0:
            weighted += overlap_s * point.intensity_g_per_kwh
            covered_s += overlap_s
    mean = weighted / covered_s if covered_s > 0 else None
    return Window(start=start, end=end, mean_intensity_g_per_kwh=mean, coverage=min(1.0, covered_s / total_s))


def _candidates(points: Sequence[IntensityPoint], now: datetime, latest: datetime, duration: timedelta):
    starts = {now, latest}
    for point in points:
        starts.update((point.start, point.end, point.start - duration, point.end - duration))
    return sorted(s for s in starts if now <= s <= latest)


def best_window(
    points: Sequence[IntensityPoint], *, now: datetime, deadline: datetime, duration_s: float
) -> Window:
    """The lowest-mean window of ``duration_s`` starting at or after ``now`` and ending by ``deadline``.

    Ties go to the earliest start. Windows less than half covered by the forecast
    are not ranked; with no ranked window at all, the job starts ``now``.
    """
    now = ensure_aware_utc(now, "now")
    deadline = ensure_aware_utc(deadline, "deadline")
    if duration_s <= 0:
        raise ConfigError(f"estimate: running time must be > 0 s, got {duration_s}")
    duration = timedelta(seconds=duration_s)
    latest = deadline - duration
    if latest < now:
        raise DeadlineError(
            f"deadline {deadline.isoformat()} leaves {(deadline - now).total_seconds() / 3600:.2f} h, "
            f"less than the {duration_s / 3600:.2f} h estimate; move the deadline or shorten the estimate"
        )
    best: Window | None = None
    best_mean_g_per_kwh = math.inf
    for start in _candidates(points, now, latest, duration):
        window = window_mean(points, start, start + duration)
        mean_g_per_kwh = window.mean_intensity_g_per_kwh
        if mean_g_per_kwh is None or window.coverage < _MIN_COVERAGE:
            continue
        # Strictly lower only, so the earliest of equal windows is kept.
        if best is None or mean_g_per_kwh < best_mean_g_per_kwh - 1e-9:
            best, best_mean_g_per_kwh = window, mean_g_per_kwh
    return best if best is not None else window_mean(points, now, now + duration)


def plan_placement(
    forecasts: Mapping[str, Sequence[IntensityPoint]],
    places: Sequence[Place],
    *,
    now: datetime,
    deadline: datetime,
    duration_s: float,
    power_kw: float | None = None,
) -> PlacementPlan:
    """Pick the place and start with the lowest expected emissions; ``forecasts`` is keyed by zone."""
    if not places:
        raise ConfigError("place: give at least one place (--zone or --place)")
    best: PlacementPlan | None = None
    for place in places:
        points = forecasts.get(place.zone)
        if points is None:
            raise ConfigError(f"zone {place.zone!r}: no forecast available for this place")
        window = best_window(points, now=now, deadline=deadline, duration_s=duration_s)
        start_now = ensure_aware_utc(now, "now")
        run_now = window_mean(points, start_now, start_now + timedelta(seconds=duration_s))
        emissions = None
        if power_kw is not None and window.mean_intensity_g_per_kwh is not None:
            emissions = window.mean_intensity_g_per_kwh * power_kw * duration_s / 3600.0
        plan = PlacementPlan(place=place, window=window, run_now=run_now, expected_emissions_g=emissions)
        if best is None or _better(plan, best):
            best = plan
    assert best is not None
    return best


def _better(plan: PlacementPlan, best: PlacementPlan) -> bool:
    mine, theirs = plan.window.mean_intensity_g_per_kwh, best.window.mean_intensity_g_per_kwh
    if mine is None:
        return False
    if theirs is None:
        return True
    # Same job everywhere, so lower mean intensity = lower expected emissions.
    return mine < theirs - 1e-9 or (abs(mine - theirs) <= 1e-9 and plan.window.start < best.window.start)


def shift_points(points: Sequence[IntensityPoint], offset: timedelta) -> list[IntensityPoint]:
    """Move a recorded trace in time and mark it a forecast ('plan as if the grid did this again')."""
    return [replace(p, start=p.start + offset, end=p.end + offset, kind=Kind.FORECAST) for p in points]
