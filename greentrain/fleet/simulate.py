"""Replay a set of jobs on one cluster against a recorded carbon trace, under a fleet policy.

The model: a job holds its GPUs only while it runs and draws its option's
power then (0 W while paused: the GPUs go back to the cluster); every resume
after its first start, and every change of width, costs ``resume_overhead_h``
of running with no progress; emissions are each interval's draw times the
trace's actual intensity then. Decisions happen at every whole hour, every
arrival, every completion and any time a policy asks to be woken; between two
decisions nothing changes, so every interval lies within one trace hour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from greentrain.errors import ConfigError
from greentrain.fleet.feed import TraceFeed
from greentrain.fleet.jobs import FleetJob
from greentrain.fleet.model import JobStatus

__all__ = ["RunState", "FleetPolicy", "SimResult", "Cluster", "simulate_fleet"]

_EPS_H = 1e-9


@dataclass(slots=True)
class RunState:
    """One job during a simulation (mutable)."""

    job: FleetJob
    submit_h: float
    deadline_h: float
    remaining_h: float
    started: bool = False
    running: int | None = None
    overhead_left_h: float = 0.0
    finished_h: float | None = None
    emissions_g: float = 0.0
    energy_kwh: float = 0.0
    resumes: int = 0
    segments: list[list[float]] = field(default_factory=list)
    """[start_h, end_h, gpus] of each stretch of running at one width."""

    def status(self, *, can_pause: bool = True) -> JobStatus:
        return JobStatus(job_id=self.job.id, options=self.job.options, remaining_h=self.remaining_h,
                         deadline_h=self.deadline_h, partition="default", running=self.running,
                         started=self.started, overhead_left_h=self.overhead_left_h,
                         can_pause=can_pause or self.running is None)


@dataclass(frozen=True, slots=True)
class Cluster:
    """The simulated cluster: one partition on the trace's zone."""

    capacity_gpus: int
    resume_overhead_h: float


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


def simulate_fleet(jobs: Sequence[FleetJob], feed: TraceFeed, policy: FleetPolicy, cluster: Cluster) -> SimResult:
    """Run every job to completion under ``policy``; ConfigError if the trace ends first."""
    runs = [RunState(job=j, submit_h=feed.hour_of(j.submit), deadline_h=feed.hour_of(j.deadline),
                     remaining_h=j.work_h) for j in jobs]
    _check_cover(runs, feed)
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
        in_use = sum(r.job.options[r.running].gpus for r in present if r.running is not None)
        peak, exceeded = max(peak, in_use), exceeded or in_use > cluster.capacity_gpus
        now_h = _advance(present, now_h, _next_epoch(now_h, present, arrivals, policy), feed)
    return SimResult(policy=policy.name, runs=runs, peak_gpus=peak, capacity_exceeded=exceeded,
                     decisions=decisions, end_h=now_h)


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
        if r.started:
            r.resumes += 1
            r.overhead_left_h = cluster.resume_overhead_h
        r.started = True
        r.running = option
        r.segments.append([now_h, now_h, r.job.options[option].gpus])


def _next_epoch(now_h: float, present: list[RunState], arrivals: list[float], policy: FleetPolicy) -> float:
    candidates = [math.floor(now_h + _EPS_H) + 1.0]
    candidates += [a for a in arrivals if a > now_h + _EPS_H][:1]
    for r in present:
        if r.running is not None:
            candidates.append(now_h + r.overhead_left_h + r.remaining_h / r.job.options[r.running].speed)
    wake = policy.wake_h(now_h)
    if wake is not None and wake > now_h + _EPS_H:
        candidates.append(wake)
    return max(min(candidates), now_h + _EPS_H)


def _advance(present: list[RunState], now_h: float, until_h: float, feed: TraceFeed) -> float:
    """Run the running jobs from ``now_h`` to ``until_h`` (inside one trace hour)."""
    intensity = float(feed.actual[int(math.floor(now_h + _EPS_H))])
    for r in present:
        if r.running is None:
            continue
        option = r.job.options[r.running]
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
        r.segments[-1][1] = now_h + span_h
        if r.finished_h is not None:
            r.running = None
    return until_h
