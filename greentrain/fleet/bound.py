"""The offline bound: the least emissions any schedule of these jobs could have.

Every job, every arrival and the whole trace known in advance; a job may run
any fraction of any hour between its submission and its deadline, at any of
its widths, with no restart overhead; the cluster's capacity holds per hour
in GPU-hours. With partitions on several grids (the spatio-temporal bound) a
job may also split its work across its places at will, with no migration
overhead, each partition's capacity held per hour. Relaxing all of that makes it a linear program whose optimum no
real schedule can beat: savings are reported as a fraction of the bound's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from greentrain.fleet.formulation import LATE_COST, CapacityRows
from greentrain.fleet.jobs import DEFAULT_PARTITION, FleetJob
from greentrain.fleet.lpmodel import LinearModel
from greentrain.fleet.model import Partition

__all__ = ["Bound", "offline_bound"]

@dataclass(frozen=True, slots=True)
class Bound:
    """The bound's emissions; ``deadlines_relaxed`` when even it cannot meet every deadline."""

    emissions_g: float
    deadlines_relaxed: bool
    solve_s: float


def offline_bound(jobs: Sequence[FleetJob], hour_of, actual: np.ndarray, capacity_gpus: int, *,
                  partitions: Mapping[str, Partition] | None = None,
                  zones: Mapping[str, np.ndarray] | None = None) -> Bound:
    """Solve the relaxation; ``hour_of(datetime)`` maps times onto the hours of ``actual`` (g/kWh).

    ``partitions`` and ``zones`` (zone -> hourly g/kWh on the same hours): the spatio-temporal bound over
    every job's places; without them one partition of ``capacity_gpus`` on ``actual``."""
    if partitions is None:
        partitions = {DEFAULT_PARTITION: Partition(DEFAULT_PARTITION, capacity_gpus, "")}
        zones = {"": actual}
    assert zones is not None
    by_part = {name: np.asarray(zones[p.zone], dtype=float) for name, p in partitions.items()}
    result = _solve(jobs, hour_of, by_part, partitions, late=False)
    if result is not None:
        return result
    relaxed = _solve(jobs, hour_of, by_part, partitions, late=True)
    assert relaxed is not None
    return relaxed


def _solve(jobs: Sequence[FleetJob], hour_of, actual: Mapping[str, np.ndarray], partitions: Mapping[str, Partition],
           *, late: bool) -> Bound | None:
    model = LinearModel()
    caps = CapacityRows()
    capacity = {name: p.capacity_gpus for name, p in partitions.items()}
    hours_known = min(a.size for a in actual.values())
    scale = max(max(o.power_kw for o in j.options) for j in jobs) * max(float(a.max()) for a in actual.values()) or 1.0
    costs: list[tuple[np.ndarray, np.ndarray]] = []
    total_gpu_h = sum(j.work_h * j.gpus for j in jobs) / sum(capacity.values())
    for job in jobs:
        submit, deadline = hour_of(job.submit), hour_of(job.deadline)
        end = min(hours_known, deadline + (job.work_h + total_gpu_h + 1.0 if late else 0.0))
        hours = np.arange(math.floor(submit), math.ceil(end))
        span = np.clip(np.minimum(hours + 1.0, end) - np.maximum(hours, submit), 0.0, None)
        keep = span > 1e-9
        hours, span = hours[keep], span[keep]
        lateness = np.clip(hours + 1.0 - deadline, 0.0, None)
        cols, speeds = [], []
        for opt in job.placed_options(capacity):
            assert opt.partition is not None
            emit = opt.power_kw * actual[opt.partition][hours]
            x = model.add(emit / scale + LATE_COST * lateness, 0.0, span)
            costs.append((x, emit))
            caps.add(opt.partition, hours, x, opt.gpus)
            cols.append(x)
            speeds.append(np.full(x.size, opt.speed))
        model.row(np.concatenate(cols), np.concatenate(speeds), lb=job.work_h)
        if len(cols) > 1:
            for i in range(hours.size):
                model.row([int(c[i]) for c in cols], 1.0, ub=float(span[i]))
    limits = {(name, int(h)): float(gpus) for name, gpus in capacity.items() for h in range(hours_known)}
    caps.emit(model, limits)
    solution = model.solve(time_limit_s=600.0)
    if not solution.ok:
        return None
    values = solution.x
    assert values is not None
    emissions = sum(float(emit @ values[cols]) for cols, emit in costs)
    return Bound(emissions_g=emissions, deadlines_relaxed=late, solve_s=solution.solve_s)
