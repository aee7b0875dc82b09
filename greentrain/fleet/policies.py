"""The fleet simulator's policies: FIFO run-now, per-job best window, and the fleet plan.

* ``RunNowFIFO``: every job queues at submission; the queue starts in order
  whenever the head fits (strict FIFO, no backfill); a started job runs to the end.
* ``PerJobWindow``: what per-job tools (``greentrain submit``) do on a shared
  cluster: at submission each job picks its own lowest-carbon contiguous window
  before its deadline from the forecast it sees then, queues at that start,
  and from there it is FIFO as above. Nobody looks at the others: they herd.
* ``CarbonAware``: the fleet plan (``plan_fleet``), re-solved at every decision
  with the forecast known then; the current slot is acted on. Each later hour
  is planned at its forecast plus ``hedge`` × the forecast's measured error at
  that many hours ahead (``TraceFeed.errors``): work moves to a later hour only
  where the forecast's advantage beats its own error there (the single-job
  wait gate, ``policies/worth.py``, asks the same of a wait). The default is
  0: on the development weeks any hedge made the plan worse (docs/benchmarks.md,
  "Fleet"); re-planning every hour already corrects what the forecast got wrong.
  Where partitions sit on several grids it places jobs too; with ``home_only``
  it plans the time only, every job at its home (a baseline).
* ``GreenestNow``: each job at submission to its greenest allowed partition
  with room now, FIFO there (FIFO and per-job windows run every job at home).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from greentrain.errors import ConfigError
from greentrain.fleet.feed import TraceFeed
from greentrain.fleet.jobs import FleetJob
from greentrain.fleet.model import FleetPlan, PlannerConfig
from greentrain.fleet.places import View, view_at
from greentrain.fleet.fleet_planner import plan_fleet
from greentrain.fleet.simulate import Cluster, RunState
from greentrain.windows import cleanest_start

__all__ = ["DEFAULT_HEDGE", "RunNowFIFO", "PerJobWindow", "CarbonAware", "GreenestNow", "best_start_h"]

_EPS_H = 1e-9
DEFAULT_HEDGE = 0.0
"""Multiples of the forecast's measured error by which a later hour is planned dearer than forecast."""


def _fifo(queue: list[RunState], runs: Sequence[RunState], cluster: Cluster,
          option_of: Callable[[RunState], int] = lambda r: 0) -> dict[str, int]:
    """Keep the running jobs; start queued ones in order while the head of each partition's queue fits.

    ``option_of``: the option a queued job starts with (default 0: its nominal width at home)."""
    chosen = {r.job.id: r.running for r in runs if r.running is not None}
    free = cluster.capacity("")
    for r in runs:
        if r.running is not None:
            free[r.part(r.running)] -= r.gpus_now()
    blocked: set[str] = set()
    for r in queue:
        option = option_of(r)
        where = r.part(option)
        if where in blocked:
            continue
        if r.options[option].gpus > free[where]:
            blocked.add(where)  # strict FIFO on each partition: nothing passes its head
            continue
        chosen[r.job.id] = option
        free[where] -= r.options[option].gpus
    return chosen


class RunNowFIFO:
    """Start at submission, in submission order, as capacity allows."""

    name = "run-now"

    def decide(self, now_h: float, runs: Sequence[RunState], cluster: Cluster) -> dict[str, int]:
        queue = [r for r in runs if r.running is None]  # runs come in submission order
        return _fifo(queue, runs, cluster)

    def wake_h(self, now_h: float) -> float | None:
        return None


def best_start_h(values: np.ndarray, now_h: float, run_h: float, deadline_h: float) -> float:
    """Start of the lowest-mean window of ``run_h`` hours in [now, deadline]; ``values[0]`` is now's hour.

    Candidates are now and every whole hour up to the latest start (intensity is constant
    within an hour); ties go to the earliest start.
    """
    if deadline_h - run_h <= now_h + _EPS_H:
        return now_h
    base = math.floor(now_h + _EPS_H)
    edges = [now_h, *np.arange(base + 1.0, min(deadline_h, base + values.size) - _EPS_H)]
    edges.append(min(deadline_h, base + values.size))
    return cleanest_start(edges, values[:len(edges) - 1].tolist(), run_h)


class PerJobWindow:
    """Each job picks its own best window at submission from the forecast then; FIFO from its start."""

    name = "per-job"

    def __init__(self, feed: TraceFeed) -> None:
        self._feed = feed
        self._start_h: dict[str, float] = {}

    def decide(self, now_h: float, runs: Sequence[RunState], cluster: Cluster) -> dict[str, int]:
        for r in runs:
            if r.job.id not in self._start_h:
                hour = int(math.floor(now_h + _EPS_H))
                horizon = max(1, int(math.ceil(r.deadline_h)) - hour)
                view = self._feed.view(hour, horizon)
                self._start_h[r.job.id] = best_start_h(view, now_h, r.job.work_h, r.deadline_h)
        queue = sorted((r for r in runs if r.running is None and self._start_h[r.job.id] <= now_h + _EPS_H),
                       key=lambda r: self._start_h[r.job.id])  # stable: submission order among equal starts
        return _fifo(queue, runs, cluster)

    def wake_h(self, now_h: float) -> float | None:
        later = [s for s in self._start_h.values() if s > now_h + _EPS_H]
        return min(later) if later else None


class CarbonAware:
    """The fleet plan, re-solved at every decision on the forecast known then."""

    name = "carbon-aware"

    def __init__(self, feed: TraceFeed, capacity_gpus: int, *, config: PlannerConfig = PlannerConfig(),
                 jobs: Sequence[FleetJob] = (), hedge: float = DEFAULT_HEDGE,
                 zones: Mapping[str, TraceFeed] | None = None, home_only: bool = False) -> None:
        """``jobs``: the whole set; unless it is small enough for the exact form throughout, every plan
        uses the rolling form, so decisions do not switch between the two models as the queue changes.
        ``hedge``: multiples of the forecast's measured error added to each later hour (0: take it as exact).
        ``zones``: zone -> the feed the plans read for it (default: ``feed`` for its zone); ``home_only``:
        every job planned at its home only (the time-only plan, a baseline where partitions sit on grids)."""
        if not hedge >= 0:
            raise ConfigError(f"hedge: must be >= 0, got {hedge}")
        self._feed = feed
        self._zones = dict(zones or {}) or {feed.zone: feed}
        self._hedge = float(hedge)
        self._home_only = home_only
        if home_only:
            self.name = "time-only"
        binaries = sum(len(j.options) * math.ceil((j.deadline - j.submit).total_seconds() / 3600) for j in jobs)
        self._config = config if binaries <= config.exact_max_binaries else replace(config, exact_max_binaries=0)
        self.plans = 0
        self.cpu_s = 0.0
        self.methods: dict[str, int] = {}
        self.last_plan: FleetPlan | None = None

    def decide(self, now_h: float, runs: Sequence[RunState], cluster: Cluster) -> dict[str, int]:
        if not runs:
            return {}
        began = time.process_time()
        hour = int(math.floor(now_h + _EPS_H))
        horizon = max(1, int(math.ceil(max(r.deadline_h for r in runs))) - hour)
        partitions = cluster.parts(self._feed.zone)
        intensity = {}
        for zone in {p.zone for p in partitions.values()}:
            feed = self._zones[zone]
            values = feed.view(hour, horizon)
            intensity[zone] = values + self._hedge * feed.errors(hour, values.size - 1) if self._hedge else values
        # Between whole hours (an arrival, a completion) jobs may start but none is paused: a pause
        # only where the intensity changes, so no run is cut into minutes that each cost a resume.
        on_the_hour = abs(now_h - round(now_h)) < 1e-6
        views = [self._status(r, on_the_hour, cluster) for r in runs]
        plan = plan_fleet([v.status for v in views], now_h=now_h, partitions=partitions, intensity=intensity,
                          resume_overhead_h=cluster.resume_overhead_h, config=self._config)
        self.plans += 1
        self.cpu_s += time.process_time() - began
        self.methods[plan.method] = self.methods.get(plan.method, 0) + 1
        self.last_plan = plan
        return {v.status.job_id: v.full(option) for v in views
                if (option := plan.jobs[v.status.job_id].option) is not None}

    def _status(self, r: RunState, can_pause: bool, cluster: Cluster) -> View:
        status = r.status(can_pause=can_pause, migration_overhead_h=cluster.migration_overhead_h)
        pinned = view_at(status, r.job.partition) if self._home_only else None
        return pinned or View(status, tuple(range(len(status.options))))

    def wake_h(self, now_h: float) -> float | None:
        return None


class GreenestNow:
    """Each job, at submission, to the allowed partition with the lowest intensity now that has room (else the
    greenest it fits); FIFO there. What "greenest region now" tools do: no waiting, no moving, and the
    greenest partition fills."""

    name = "greenest-now"

    def __init__(self, zones: Mapping[str, TraceFeed]) -> None:
        self._zones = zones
        self._option: dict[str, int] = {}

    def decide(self, now_h: float, runs: Sequence[RunState], cluster: Cluster) -> dict[str, int]:
        hour = int(math.floor(now_h + _EPS_H))
        parts = cluster.parts(next(iter(self._zones)))
        free = cluster.capacity("")
        for r in runs:
            if r.running is not None:
                free[r.part(r.running)] -= r.gpus_now()
            elif r.job.id in self._option:  # queued there: its room is taken
                free[r.part(self._option[r.job.id])] -= r.options[self._option[r.job.id]].gpus
        for r in runs:
            if r.job.id in self._option:
                continue
            now_g = {o: float(self._zones[parts[r.part(o)].zone].actual[hour]) for o in range(len(r.options))
                     if r.options[o].gpus == r.job.gpus}  # its nominal width at each place
            roomy = [o for o in now_g if r.options[o].gpus <= free[r.part(o)]]
            option = min(roomy or now_g, key=lambda o: (now_g[o], o))
            self._option[r.job.id] = option
            free[r.part(option)] -= r.options[option].gpus
        queue = [r for r in runs if r.running is None]
        return _fifo(queue, runs, cluster, lambda r: self._option[r.job.id])

    def wake_h(self, now_h: float) -> float | None:
        return None
