"""Prometheus collector over the monitor, the carbon signal and the job state.

It reads only state that other threads already hold (the monitor's last
readings, a ``JobStats`` snapshot taken under its lock, the signal view's
cache), so a scrape never touches hardware or the network and never waits on
the training step. Register it in your own registry::

    registry = CollectorRegistry()
    registry.register(GreentrainCollector(job="llm-7b", monitor=monitor, job_stats=stats))
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:
    from greentrain.jobstats import JobStats
    from greentrain.monitor import Monitor
    from greentrain.signals.chain import SignalChain

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from greentrain.clock import Clock, SystemClock
import greentrain.exporters.names as n
from greentrain.exporters.signalview import SignalView
from greentrain.jobstats import JobState

__all__ = ["GreentrainCollector", "Sample", "families"]

log = logging.getLogger(__name__)

Sample = tuple[str, tuple[tuple[str, str], ...], float]
"""(metric name, ((label, value), ...) in the spec's label order, value)."""


def _text(value: object) -> str:
    return str(value.value if isinstance(value, Enum) else value)  # a Source label: its value


def _ok(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _sample(spec: n.MetricSpec, value: object, *label_values: object) -> Sample | None:
    if not _ok(value):
        return None
    return spec.name, tuple(zip(spec.labels, map(_text, label_values), strict=True)), float(value)


def families(samples: Iterable[Sample]) -> Iterator[Metric]:
    """Group samples into prometheus-client metric families, in ``names.METRICS`` order."""
    by_name: dict[str, list[Sample]] = {}
    for sample in samples:
        by_name.setdefault(sample[0], []).append(sample)
    for spec in n.METRICS:
        rows = by_name.get(spec.name)
        if not rows:
            continue
        cls = CounterMetricFamily if spec.type == "counter" else GaugeMetricFamily
        family = cls(spec.family, spec.help, labels=list(spec.labels))
        for _name, labels, value in rows:
            family.add_metric([v for _, v in labels], value)
        yield family


class GreentrainCollector(Collector):
    """Exports greentrain's metrics (``greentrain.exporters.names``) for one job or one node.

    ``job`` labels the job-level series; without ``job_stats`` (node exporter
    mode) only device and signal series are exported.
    """

    def __init__(self, *, job: str, monitor: Monitor | None = None, signals: SignalChain | None = None,
                 job_stats: JobStats | None = None,
                 clock: Clock | None = None, signal_refresh_s: float = 60.0) -> None:
        self.job = job
        self.monitor = monitor
        self.job_stats = job_stats
        self.clock = clock or SystemClock()
        self.finished_at_s: float | None = None
        """Set by the server at stop: exported as ``greentrain_job_finished_timestamp_seconds``."""
        self._signals = SignalView(signals, refresh_s=signal_refresh_s) if signals is not None else None

    def collect(self) -> Iterator[Metric]:
        yield from families(self.samples())

    def describe(self) -> list[Metric]:
        # Empty: the registry must not call collect() at register time (it would read devices).
        return []

    def samples(self) -> list[Sample]:
        """All current samples. Each source is read on its own, so one failing part drops only its series."""
        out: list[Sample | None] = []
        for part in (self._device_samples, self._signal_samples, self._job_samples):
            try:
                out.extend(part())
            except Exception as e:  # a broken reader must not break the scrape
                log.warning("metrics: %s failed: %s", part.__name__, type(e).__name__)
        return [s for s in out if s is not None]

    def close(self) -> None:
        """Stop the signal refresher thread."""
        if self._signals is not None:
            self._signals.close()

    def _device_samples(self) -> Iterator[Sample | None]:
        if self.monitor is None:
            return
        for r in self.monitor.readings():
            if r.kind == "cpu":
                yield _sample(n.CPU_ENERGY, r.energy_j, r.name, r.source)
                continue
            gpu, uuid = (str(r.index) if r.index is not None else r.name), r.uuid or ""
            yield _sample(n.GPU_READING_OK, 0 if r.failed else 1, gpu, uuid)
            yield _sample(n.GPU_ENERGY, r.energy_j, gpu, uuid, r.source)
            yield _sample(n.GPU_POWER, r.power_w, gpu, uuid)
            yield _sample(n.GPU_POWER_LIMIT, r.power_limit_w, gpu, uuid)
            yield _sample(n.GPU_SM_CLOCK, r.sm_clock_hz, gpu, uuid)

    def _signal_samples(self) -> Iterator[Sample | None]:
        if self._signals is None:
            return
        reading = self._signals.read()
        point = reading.latest
        if point is not None:
            yield _sample(n.GRID_INTENSITY, point.intensity_g_per_kwh, point.zone, point.provider, point.kind)
        ahead = reading.forecast_at(self.clock.now())
        if ahead is not None:
            yield _sample(n.GRID_INTENSITY, ahead.intensity_g_per_kwh, ahead.zone, ahead.provider, "forecast")
        status = reading.status
        if status is not None:
            yield _sample(n.SIGNAL_AGE, reading.age_s(), status.provider)
            yield _sample(n.SIGNAL_STALE, 1 if status.stale else 0, status.provider)

    def _job_samples(self) -> Iterator[Sample | None]:
        if self.job_stats is None:
            return
        s = self.job_stats.snapshot()
        job = self.job
        # Unknown emissions (energy with no carbon signal) are absent, never exported as 0 g.
        yield _sample(n.EMISSIONS, s.emissions_g if s.emissions_known else None, job)
        yield _sample(n.JOB_EMISSIONS_AVOIDED, s.emissions_avoided_g if s.emissions_known else None, job)
        yield _sample(n.EMISSIONS_AVOIDED, s.emissions_avoided_g if s.emissions_known else None, job)
        yield _sample(n.EMISSIONS_UNPRICED_ENERGY, s.unpriced_energy_j, job)
        yield _sample(n.WAITING_ENERGY, s.waiting_energy_j, job)
        yield _sample(n.WAITING_POWER, s.waiting_power_w, job)
        yield _sample(n.BUDGET_REMAINING, s.budget_remaining_g, job)
        yield _sample(n.BUDGET_PROJECTED, s.budget_projected_g, job)
        yield _sample(n.JOB_ENERGY, s.energy_j, job)
        if s.last_step_source:
            yield _sample(n.JOB_STEP_ENERGY, s.last_step_energy_j, job, s.last_step_source)
        yield _sample(n.TRAINING_STEPS, s.steps_total, job)
        yield _sample(n.TRAINING_TOKENS, s.tokens_total, job)
        for state in JobState:
            yield _sample(n.JOB_STATE, 1 if s.state == state else 0, job, state)
        for action, count in sorted(s.actions_total.items()):
            yield _sample(n.POLICY_ACTIONS, count, job, action)
        yield _sample(n.JOB_REPLICAS, s.replicas_planned, job, "planned")  # absent for a fixed-size job
        yield _sample(n.JOB_REPLICAS, s.replicas_actual, job, "actual")
        for expert, tokens in sorted(s.expert_tokens_total.items(), key=lambda item: int(item[0])):
            yield _sample(n.EXPERT_TOKENS, tokens, job, expert)
        yield _sample(n.EXPERT_IMBALANCE, s.expert_imbalance, job)
        yield _sample(n.JOB_POWER_LIMIT, s.power_limit_w, job)
        if s.precision:
            yield _sample(n.JOB_PRECISION, 1, job, s.precision)
        yield _sample(n.JOB_DEADLINE, _timestamp(s.deadline), job)
        yield _sample(n.JOB_PROJECTED_FINISH, _timestamp(s.projected_finish), job)
        yield _sample(n.SETTINGS_UNRESTORED, s.settings_unrestored, job)
        yield _sample(n.POWER_CAP_REFUSED, s.power_cap_refused_total, job)
        yield _sample(n.JOB_FINISHED, self.finished_at_s, job)
        yield from self._advice_samples(s, job)

    @staticmethod
    def _advice_samples(s: JobStats, job: str) -> Iterator[Sample | None]:
        """Advisory mode's decisions (absent outside it: every field stays None)."""
        yield _sample(n.JOB_ADVISED_POWER_LIMIT, s.advised_power_limit_w, job)
        clock_mhz = s.advised_sm_clock_mhz
        yield _sample(n.JOB_ADVISED_SM_CLOCK, clock_mhz * 1e6 if clock_mhz is not None else None, job)
        if s.advised_precision:
            yield _sample(n.JOB_ADVISED_PRECISION, 1, job, s.advised_precision)
        yield _sample(n.JOB_ADVISED_ENERGY_CHANGE, s.advised_energy_change, job)
        yield _sample(n.JOB_ADVISED_TIME_CHANGE, s.advised_time_change, job)


def _timestamp(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None

