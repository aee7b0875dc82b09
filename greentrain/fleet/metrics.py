"""The fleet controller's numbers for Prometheus (names in ``greentrain.exporters.names``).

The controller publishes a ``FleetSnapshot`` after every round; a scrape
reads the latest one under a lock and never waits on Slurm or the solver::

    stats = FleetStats()
    registry.register(FleetCollector(stats))
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

import greentrain.exporters.names as n
from greentrain.exporters.collector import Sample, families

__all__ = ["FleetSnapshot", "FleetStats", "FleetCollector", "JOB_STATES"]

JOB_STATES = ("running", "pausing", "paused", "waiting")


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


class FleetStats:
    """The latest snapshot, swapped whole under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = FleetSnapshot()

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
        return [x for x in out if x is not None]

    def collect(self) -> Iterator[Metric]:
        yield from families(self.samples())
