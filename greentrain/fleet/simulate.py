"""Replay a set of jobs on a cluster's partitions against recorded carbon traces, under a fleet policy.

The model: a job holds its GPUs only while it runs and draws its option's
power then (0 W while paused: the GPUs go back to the cluster); every resume
after its first start, and every change of width, costs ``resume_overhead_h``
of running with no progress; emissions are each interval's draw times the
trace's actual intensity then. A cluster is one partition on the trace's zone,
or several partitions, each on its own zone and trace: a job runs at one of its
places at a time, and a started job that resumes on another partition pays
the migration overhead instead of a resume (a pause plus a resume elsewhere).
A job that has never run starts anywhere at no cost. Decisions happen at every whole hour, every
arrival, every completion and any time a policy asks to be woken; between two
decisions nothing changes, so every interval lies within one trace hour.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from greentrain.errors import ConfigError
from greentrain.fleet.feed import TraceFeed
from greentrain.fleet.jobs import DEFAULT_PARTITION, FleetJob, RunOption
from greentrain.fleet.model import JobStatus, Partition

__all__ = ["RunState", "FleetPolicy", "SimResult", "Cluster", "simulate_fleet"]

_EPS_H = 1e-9


@dataclass(slots=True)
class RunState:
    """One job during a simulation (mutable)."""

    job: FleetJob
    submit_h: float
    deadline_h: float
    remaining_h: float
    options: tuple[RunOption, ...] = ()
    """Its ways to run on this cluster, each on its partition (``FleetJob.placed_options``); ``running``
    indexes these."""
    location: str = DEFAULT_PARTITION
    """Where it runs, else where its checkpoint is, else where it will first run (its home if allowed)."""
    started: bool = False
    running: int | None = None
    overhead_left_h: float = 0.0
    finished_h: float | None = None
    emissions_g: float = 0.0
    energy_kwh: float = 0.0
    resumes: int = 0
    migrations: int = 0
    """Resumes on another partition than the one it left (not counted in ``resumes``)."""
    segments: list[list[float]] = field(default_factory=list)
    """[start_h, end_h, gpus] of each stretch of running at one width."""
    segment_partitions: list[str] = field(default_factory=list)
    """The partition of each segment."""
    by_partition: dict[str, list[float]] = field(default_factory=dict)
    """Partition -> [energy kWh, emissions g, GPU-hours] spent there."""

    def __post_init__(self) -> None:
        if not self.options:
            self.options = self.job.options

    def status(self, *, can_pause: bool = True, migration_overhead_h: float | None = None) -> JobStatus:
        return JobStatus(job_id=self.job.id, options=self.options, remaining_h=self.remaining_h,
                         deadline_h=self.deadline_h, partition=self.location, running=self.running,
                         started=self.started, overhead_left_h=self.overhead_left_h,
                         can_pause=can_pause or self.running is None, migration_overhead_h=migration_overhead_h)

    def gpus_now(self) -> int:
        """GPUs it holds (0 while it waits)."""
        return self.options[self.running].gpus if self.running is not None else 0

    def part(self, option: int) -> str:
        return self.options[option].partition or self.location


@dataclass(frozen=True, slots=True)
class Cluster:
    """The simulated cluster: one partition on the trace's zone, or ``partitions`` on their own zones."""

    capacity_gpus: int
    """GPUs in all (one partition: its capacity)."""
    resume_overhead_h: float
    partitions: tuple[Partition, ...] = ()
    """Empty: one partition named 'default' of ``capacity_gpus`` on the trace's zone."""
    migration_overhead_h: float | None = None
    """Running time without progress of a resume on another partition; None: as a resume."""

    @classmethod
    def of(cls, partitions: Sequence[Partition], resume_overhead_h: float,
           migration_overhead_h: float | None = None) -> Cluster:
        """A cluster of several partitions."""
        return cls(sum(p.capacity_gpus for p in partitions), resume_overhead_h, tuple(partitions),
                   migration_overhead_h)

    def parts(self, zone: str) -> dict[str, Partition]:
        """Partition name -> partition; ``zone``: the one partition's zone when none were given."""
        if not self.partitions:
            return {DEFAULT_PARTITION: Partition(DEFAULT_PARTITION, self.capacity_gpus, zone)}
        return {p.name: p for p in self.partitions}

    def capacity(self, zone: str) -> dict[str, int]:
        return {name: p.capacity_gpus for name, p in self.parts(zone).items()}


class FleetPolicy(Protocol):
    """Chooses which jobs run (and at which option) from ``now_h`` until the next decision."""

    name: str

    def decide(self, now_h: float, runs: Sequence[RunState], cluster: Cluster) -> dict[str, int]:
        ...

    def wake_h(self, now_h: float) -> float | None:
        """The next time (after ``now_h``) this policy wants to decide again, if any."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult:
    """What happened under one policy."""

    policy: str
    runs: list[RunState]
    peak_gpus: int
    capacity_exceeded: bool
    decisions: int
    end_h: float

    @property
    def emissions_g(self) -> float:
        return sum(r.emissions_g for r in self.runs)

    @property
    def energy_kwh(self) -> float:
        return sum(r.energy_kwh for r in self.runs)

    @property
    def late(self) -> list[RunState]:
        return [r for r in self.runs if r.finished_h is None or r.finished_h > r.deadline_h + 1e-6]

    @property
    def migrations(self) -> int:
        return sum(r.migrations for r in self.runs)


def simulate_fleet(jobs: Sequence[FleetJob], feed: TraceFeed, policy: FleetPolicy, cluster: Cluster, *,
                   zones: Mapping[str, TraceFeed] | None = None) -> SimResult:
    """Run every job to completion under ``policy``; ConfigError if a trace ends first.

    ``zones``: zone -> trace of every partition's zone (all on ``feed``'s hours: the same first hour);
    default: ``feed`` for its own zone."""
    parts = cluster.parts(feed.zone)
    traces = dict(zones or {}) or {feed.zone: feed}
    runs = [_run_state(j, feed, cluster.capacity(feed.zone)) for j in jobs]
    _check_cover(runs, feed)
    for zone in {p.zone for p in parts.values()}:
        if zone not in traces:
            raise ConfigError(f"zone {zone}: no trace")
        if traces[zone] is not feed:
            _check_cover(runs, traces[zone])
    intensity = {name: traces[p.zone].actual for name, p in parts.items()}
    capacity = cluster.capacity(feed.zone)
    arrivals = sorted({r.submit_h for r in runs})
    now_h = arrivals[0]
    peak, exceeded, decisions = 0, False, 0
    while any(r.finished_h is None for r in runs):
        if now_h >= feed.hours - _EPS_H:
            open_ids = ", ".join(r.job.id for r in runs if r.finished_h is None)[:200]
            raise ConfigError(f"--trace: {feed.name} ends {feed.at(feed.hours).isoformat()} before every job "
                              f"finished (still running or waiting: {open_ids}); give a longer trace")
        present = [r for r in runs if r.finished_h is None and r.submit_h <= now_h + _EPS_H]
        chosen = policy.decide(now_h, present, cluster)
        decisions += 1
        _apply(present, chosen, now_h, cluster)
        in_use = {name: 0 for name in capacity}
        for r in present:
            if r.running is not None:
                in_use[r.part(r.running)] += r.gpus_now()
        peak = max(peak, sum(in_use.values()))
        exceeded = exceeded or any(in_use[name] > gpus for name, gpus in capacity.items())
        now_h = _advance(present, now_h, _next_epoch(now_h, present, arrivals, policy), intensity)
    return SimResult(policy=policy.name, runs=runs, peak_gpus=peak, capacity_exceeded=exceeded,
                     decisions=decisions, end_h=now_h)


def _run_state(job: FleetJob, feed: TraceFeed, capacity: Mapping[str, int]) -> RunState:
    options = job.placed_options(capacity)
    if not options:
        raise ConfigError(f"job {job.id}: {job.gpus} GPUs fit none of its places "
                          f"({', '.join(job.allowed(list(capacity))) or 'none known'})")
    return RunState(job=job, submit_h=feed.hour_of(job.submit), deadline_h=feed.hour_of(job.deadline),
                    remaining_h=job.work_h, options=options, location=options[0].partition or DEFAULT_PARTITION)


def _check_cover(runs: list[RunState], feed: TraceFeed) -> None:
    first = min(r.submit_h for r in runs)
    last = max(r.deadline_h for r in runs)
    if first < 0 or last > feed.hours:
        raise ConfigError(f"--trace: {feed.name} covers {feed.at(0).isoformat()} to {feed.at(feed.hours).isoformat()}; "
                          f"the jobs need {feed.at(first).isoformat()} to {feed.at(last).isoformat()} "
                          "(first submit to last deadline)")


def _apply(present: list[RunState], chosen: dict[str, int], now_h: float, cluster: Cluster) -> None:
    for r in present:
        option = chosen.get(r.job.id)
        if option == r.running:
            continue
        r.running = None  # a pause, or a change of width: the job stops first
        r.overhead_left_h = 0.0
        if option is None:
            continue
        where = r.part(option)
        if r.started and where != r.location:
            r.migrations += 1
            r.overhead_left_h = (cluster.resume_overhead_h if cluster.migration_overhead_h is None
                                 else cluster.migration_overhead_h)
        elif r.started:
            r.resumes += 1
            r.overhead_left_h = cluster.resume_overhead_h
        r.started = True
        r.running = option
        r.location = where
        r.segments.append([now_h, now_h, r.options[option].gpus])
        r.segment_partitions.append(where)


def _next_epoch(now_h: float, present: list[RunState], arrivals: list[float], policy: FleetPolicy) -> float:
    candidates = [math.floor(now_h + _EPS_H) + 1.0]
    candidates += [a for a in arrivals if a > now_h + _EPS_H][:1]
    for r in present:
        if r.running is not None:
            candidates.append(now_h + r.overhead_left_h + r.remaining_h / r.options[r.running].speed)
    wake = policy.wake_h(now_h)
    if wake is not None and wake > now_h + _EPS_H:
        candidates.append(wake)
    return max(min(candidates), now_h + _EPS_H)


def _advance(present: list[RunState], now_h: float, until_h: float, actual: Mapping[str, np.ndarray]) -> float:
    """Run the running jobs from ``now_h`` to ``until_h`` (inside one trace hour); ``actual``: partition ->
    its zone's hourly intensities."""
    hour = int(math.floor(now_h + _EPS_H))
    for r in present:
        if r.running is None:
            continue
        intensity = float(actual[r.location][hour])
        option = r.options[r.running]
        span_h = until_h - now_h
        overhead_h = min(r.overhead_left_h, span_h)
        r.overhead_left_h -= overhead_h
        progress_h = (span_h - overhead_h) * option.speed
        if progress_h >= r.remaining_h - 1e-9:
            span_h = overhead_h + r.remaining_h / option.speed
            r.remaining_h = 0.0
            r.finished_h = now_h + span_h
        else:
            r.remaining_h -= progress_h
        r.energy_kwh += option.power_kw * span_h
        r.emissions_g += option.power_kw * span_h * intensity
        there = r.by_partition.setdefault(r.location, [0.0, 0.0, 0.0])
        there[0] += option.power_kw * span_h
        there[1] += option.power_kw * span_h * intensity
        there[2] += option.gpus * span_h
        r.segments[-1][1] = now_h + span_h
        if r.finished_h is not None:
            r.running = None
    return until_h
