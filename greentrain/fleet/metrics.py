"""The fleet controller's numbers for Prometheus (names in ``greentrain.exporters.names``).

The controller publishes a ``FleetSnapshot`` after every round; a scrape
reads the latest one under a lock and never waits on Slurm or the solver::

    stats = FleetStats()
    registry.register(FleetCollector(stats))

A fleet spread over partitions on several grid zones is also shown per
partition: ``PartitionMeter.round`` turns one round's plan and jobs into
``PartitionFigures`` (planned and running GPUs, capacity, intensity now) and
keeps the counters that span rounds (migrations, emissions by zone), which
the snapshot carries as ``partitions``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

import greentrain.exporters.names as n
from greentrain.exporters.collector import Sample, families
from greentrain.fleet.model import FleetPlan, JobStatus

__all__ = ["FleetSnapshot", "FleetStats", "FleetCollector", "JOB_STATES", "JobPlace", "PartitionNow",
           "PartitionFigures", "PartitionMeter"]

JOB_STATES = ("running", "pausing", "paused", "waiting")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPlace:
    """One managed job in one round: where it is and what it draws there."""

    job_id: str
    partition: str
    """Where it runs, else where its checkpoint is, else its home."""
    gpus: int
    power_kw: float
    """What it draws while it runs (its GPUs x power per GPU)."""
    running: bool
    """It holds its GPUs now (running, or stopping after a pause signal)."""
    started: bool
    """It has run before, so a change of partition moved its checkpoint (a migration)."""


@dataclass(frozen=True, slots=True)
class PartitionNow:
    """One partition in the latest round."""

    zone: str
    capacity_gpus: int = 0
    planned_gpus: int = 0
    running_gpus: int = 0
    intensity_g_per_kwh: float | None = None
    """The current hour's intensity on its zone; None when no plan needed it."""


@dataclass(frozen=True, slots=True)
class PartitionFigures:
    """Per-partition gauges of the latest round and the counters kept since the controller started."""

    partitions: dict[str, PartitionNow] = field(default_factory=dict)
    migrations: dict[tuple[str, str], int] = field(default_factory=dict)
    """(from partition, to partition) -> migrations so far; every ordered pair of partitions, zeros included."""
    emitted_g_by_zone: dict[str, float] = field(default_factory=dict)
    """Zone -> estimated grams of what ran there so far."""


class PartitionMeter:
    """Turns each round into ``PartitionFigures``, accruing migrations and emissions by zone between rounds.

    Emissions are accounted as the fleet's ``kind=actual`` figure is: the draw of the running jobs times the
    current intensity of their partition's zone, held from one round until the next.
    """

    def __init__(self) -> None:
        self._where: dict[str, str] = {}  # job id -> partition it was on last round
        self._migrations: dict[tuple[str, str], int] = {}
        self._emitted_g: dict[str, float] = {}
        self._rates: tuple[float, dict[str, float]] | None = None  # (plan hour, zone -> g/h) of the last round

    def round(self, now_h: float, *, zones: Mapping[str, str], capacity: Mapping[str, int],
              intensity_g_per_kwh: Mapping[str, float], jobs: Iterable[JobPlace], plan: FleetPlan | None = None,
              statuses: Iterable[JobStatus] = ()) -> PartitionFigures:
        """The figures after the round at ``now_h`` (plan hours).

        ``zones``: partition -> grid zone; ``capacity``: partition -> GPUs up; ``intensity_g_per_kwh``:
        partition -> the current hour's intensity. ``plan`` gives the planned GPUs: a job's chosen option
        runs on ``statuses``' partition for it, or where ``jobs`` says it is when no status is given.
        """
        jobs = list(jobs)
        parts = dict(zones)
        for job in jobs:
            parts.setdefault(job.partition, "unknown")
        self._book(now_h, parts, intensity_g_per_kwh, jobs)
        self._move(jobs)
        running = dict.fromkeys(parts, 0)
        for job in jobs:
            running[job.partition] += job.gpus if job.running else 0
        planned = _planned_gpus(plan, statuses, jobs, parts)
        for a in parts:
            for b in parts:
                if a != b:
                    self._migrations.setdefault((a, b), 0)
        for zone in set(parts.values()):
            self._emitted_g.setdefault(zone, 0.0)
        now = {p: PartitionNow(zone, capacity.get(p, 0), planned.get(p, 0), running[p], intensity_g_per_kwh.get(p))
               for p, zone in parts.items()}
        return PartitionFigures(now, dict(self._migrations), dict(self._emitted_g))

    def _book(self, now_h: float, parts: Mapping[str, str], intensity: Mapping[str, float],
              jobs: list[JobPlace]) -> None:
        """Add what ran since the last round at its rates, then keep this round's rates until the next."""
        if self._rates is not None:
            elapsed_h = max(0.0, now_h - self._rates[0])
            for zone, g_per_h in self._rates[1].items():
                self._emitted_g[zone] = self._emitted_g.get(zone, 0.0) + g_per_h * elapsed_h
        rates: dict[str, float] = {}
        for job in jobs:
            if job.running:
                zone = parts[job.partition]
                rates[zone] = rates.get(zone, 0.0) + job.power_kw * intensity.get(job.partition, 0.0)
        self._rates = (now_h, rates)

    def _move(self, jobs: list[JobPlace]) -> None:
        where: dict[str, str] = {}
        for job in jobs:
            before = self._where.get(job.job_id)
            if job.started and before is not None and before != job.partition:
                self._migrations[(before, job.partition)] = self._migrations.get((before, job.partition), 0) + 1
            where[job.job_id] = job.partition
        self._where = where  # a job gone from the fleet (finished) is forgotten


def _planned_gpus(plan: FleetPlan | None, statuses: Iterable[JobStatus], jobs: list[JobPlace],
                  parts: Mapping[str, str]) -> dict[str, int]:
    """Partition -> GPUs the plan runs managed jobs on now."""
    planned = dict.fromkeys(parts, 0)
    if plan is None:
        return planned
    by_id = {st.job_id: st for st in statuses}
    places = {job.job_id: job for job in jobs}
    for job_id, job_plan in plan.jobs.items():
        option = job_plan.option
        if option is None:
            continue
        st, place = by_id.get(job_id), places.get(job_id)
        if st is not None:
            where, gpus = st.part(option), st.options[option].gpus
        elif place is not None:
            where, gpus = place.partition, place.gpus
        else:
            continue
        planned[where] = planned.get(where, 0) + gpus
    return planned


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """The fleet after one controller round."""

    gpus_in_use: int = 0
    gpus_capacity: int = 0
    jobs: dict[str, int] = field(default_factory=dict)
    """Managed jobs per state in ``JOB_STATES``."""
    emitted_g: dict[str, float] = field(default_factory=dict)
    """'actual' and 'planned' grams so far (estimated)."""
    planned_remaining_g: float | None = None
    deadlines_at_risk: int = 0
    slurm_errors: int = 0
    plan_cpu_s: float | None = None
    partitions: PartitionFigures = field(default_factory=PartitionFigures)
    """Per partition and zone (``PartitionMeter.round``); empty until the controller fills it."""


class FleetStats:
    """The latest snapshot, swapped whole under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = FleetSnapshot()
        self.meter = PartitionMeter()  # the controller's per-partition counters; only its rounds call it

    def publish(self, snapshot: FleetSnapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    def snapshot(self) -> FleetSnapshot:
        with self._lock:
            return self._snapshot


def _sample(spec: n.MetricSpec, value: float | None, *labels: str) -> Sample | None:
    if value is None:
        return None
    return spec.name, tuple(zip(spec.labels, labels, strict=True)), float(value)


def _partition_samples(figures: PartitionFigures) -> list[Sample | None]:
    out: list[Sample | None] = []
    for name, p in sorted(figures.partitions.items()):
        out += [_sample(n.FLEET_PARTITION_GPUS, value, name, p.zone, state)
                for state, value in (("planned", p.planned_gpus), ("running", p.running_gpus),
                                     ("capacity", p.capacity_gpus))]
        out.append(_sample(n.FLEET_PARTITION_INTENSITY, p.intensity_g_per_kwh, name, p.zone))
    out += [_sample(n.FLEET_MIGRATIONS, count, a, b) for (a, b), count in sorted(figures.migrations.items())]
    out += [_sample(n.FLEET_ZONE_EMISSIONS, g, zone) for zone, g in sorted(figures.emitted_g_by_zone.items())]
    return out


class FleetCollector(Collector):
    """Exports the fleet metrics from a ``FleetStats``."""

    def __init__(self, stats: FleetStats) -> None:
        self.stats = stats

    def describe(self) -> list[Metric]:
        return []

    def samples(self) -> list[Sample]:
        s = self.stats.snapshot()
        out = [_sample(n.FLEET_GPUS, s.gpus_in_use, "in_use"), _sample(n.FLEET_GPUS, s.gpus_capacity, "capacity")]
        out += [_sample(n.FLEET_JOBS, s.jobs.get(state, 0), state) for state in JOB_STATES]
        out += [_sample(n.FLEET_EMISSIONS, s.emitted_g.get(kind, 0.0), kind) for kind in ("actual", "planned")]
        out += [_sample(n.FLEET_PLANNED_REMAINING, s.planned_remaining_g),
                _sample(n.FLEET_DEADLINES_AT_RISK, s.deadlines_at_risk),
                _sample(n.FLEET_SLURM_ERRORS, s.slurm_errors),
                _sample(n.FLEET_PLAN_SECONDS, s.plan_cpu_s)]
        out += _partition_samples(s.partitions)
        return [x for x in out if x is not None]

    def collect(self) -> Iterator[Metric]:
        yield from families(self.samples())
