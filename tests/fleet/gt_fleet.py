"""Helpers for the fleet tests: synthetic traces, jobs, and a brute-force optimum of the simulator's model."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from greentrain.fleet.feed import TraceFeed
from greentrain.fleet.jobs import FleetJob, RunOption
from greentrain.signals.base import IntensityPoint, Kind

T0 = datetime(2022, 3, 7, tzinfo=UTC)


def feed(values: Sequence[float], zone: str = "XX") -> TraceFeed:
    """A perfect-foresight feed over hourly ``values`` from T0."""
    points = [IntensityPoint(start=T0 + timedelta(hours=h), end=T0 + timedelta(hours=h + 1), intensity_g_per_kwh=v,
                             kind=Kind.ACTUAL, provider="test", zone=zone) for h, v in enumerate(values)]
    return TraceFeed(points, "test-trace", None)


def job(job_id: str, *, gpus: int, work_h: float, deadline_h: float, submit_h: float = 0.0,
        power_kw_per_gpu: float = 1.0) -> FleetJob:
    submit = T0 + timedelta(hours=submit_h)
    return FleetJob(id=job_id, submit=submit, work_h=work_h, deadline=submit + timedelta(hours=deadline_h),
                    options=(RunOption(gpus, 1.0, gpus * power_kw_per_gpu),))


@dataclass(frozen=True, slots=True)
class Pattern:
    """One job run in some whole slots (from their start; it stops when done)."""

    active: np.ndarray
    emissions_g: float
    finish_h: float


def _patterns(j: FleetJob, values: np.ndarray, overhead_h: float) -> list[Pattern]:
    """Every on/off pattern over the slots that finishes the job with no slot wasted after the finish."""
    out = []
    slots = values.size
    for bits in itertools.product((0, 1), repeat=slots):
        left, started, emissions, finish, wasted = j.work_h, False, 0.0, None, False
        for k, on in enumerate(bits):
            if not on:
                continue
            if finish is not None:
                wasted = True
                break
            overhead = overhead_h if started and not bits[k - 1] else 0.0
            started = True
            ran = min(1.0, overhead + left)
            left -= ran - overhead
            emissions += j.options[0].power_kw * ran * values[k]
            if left <= 1e-9:
                finish = k + ran
        if finish is not None and not wasted:
            out.append(Pattern(np.array(bits) * j.gpus, emissions, finish))
    return out


def brute_force(jobs: Sequence[FleetJob], values: Sequence[float], capacity: int, overhead_h: float) -> float | None:
    """Least total emissions over every combination of patterns that fits the capacity and meets every
    deadline (all jobs submitted at T0); None when no combination does."""
    values = np.asarray(values, dtype=float)
    per_job = []
    for j in jobs:
        deadline_h = (j.deadline - T0).total_seconds() / 3600
        per_job.append([p for p in _patterns(j, values, overhead_h) if p.finish_h <= deadline_h + 1e-9])
    best = math.inf
    for combo in itertools.product(*per_job):
        if (sum(p.active for p in combo) <= capacity).all():
            best = min(best, sum(p.emissions_g for p in combo))
    return None if best == math.inf else best
