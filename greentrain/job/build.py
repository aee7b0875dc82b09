"""``build_job``: the one place a job's parts and its ``Engine`` are assembled.

``Session``, the framework callbacks' ``StepDriver`` and ``greentrain run``
each call it with a ``JobOptions`` (the settings) and ``JobParts`` (the
objects: clock, devices, actuators, monitor, model). It opens, in order, the
run log, the energy monitor, the carbon signal (rank 0), the metrics endpoint,
the hardware (actuators, operating-point profiler, precision controller) and
the engine; restores what a killed predecessor left on the GPUs and the prior
run's totals. ``Job.close`` closes them all, engine first and knobs last. A
failure half-way closes what was already opened before it is raised.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from datetime import datetime
from typing import Any, Literal

from greentrain.clock import Clock, SystemClock, ensure_aware_utc, parse_deadline
from greentrain.engine import Engine
from greentrain.device.discovery import DeviceSet
from greentrain.engine.budget import Budget
from greentrain.engine.collaborators import Actuators, CarbonSignal, EnergyMonitor
from greentrain.events import EventLog
from greentrain.job.hardware import JobHardware, build_hardware, discover_devices
from greentrain.job.options import JobOptions
from greentrain.job.resources import build_monitor, build_signals, close_all, start_metrics
from greentrain.job.state import EngineState, restore_into
from greentrain.jobstats import JobStats
from greentrain.policies.base import Policy

__all__ = ["Job", "JobParts", "build_job", "resolve_deadline", "planning_step_time_s"]


@dataclass(kw_only=True)
class JobParts:
    """The objects a job is built from (not settings; those are ``JobOptions``). All optional."""

    clock: Clock | None = None
    """The job clock (``ReplayClock`` for demos and tests); default: the system clock."""
    devices: DeviceSet | Literal[False] | None = None
    """A ``DeviceSet``; None discovers this machine's devices; False measures nothing."""
    actuators: Actuators | None = None
    """Your own ``ActuatorSet`` (default: built when power or precision control is on)."""
    monitor: EnergyMonitor | None = None
    """Your own started ``Monitor`` (default: one over ``devices``, stopped at close)."""
    model: Any = None
    """The model: its fingerprint keys the operating-point cache."""
    rate_probe: Callable[[], float | None] | None = None
    """``() -> seconds per step`` asked at re-plans while waiting: a busier machine resumes sooner."""


@dataclass
class Job:
    """An assembled job: the engine and what it was built from, closed together by ``close``."""

    engine: Engine
    hardware: JobHardware
    event_log: EventLog | None = None
    monitor: EnergyMonitor | None = None
    signals: CarbonSignal | None = None
    metrics: Any = None
    """The running ``MetricsServer`` (its bound port in ``.port``), or None."""
    devices: DeviceSet | None = None
    closers: list[Callable[[], Any]] = field(default_factory=list)

    def close(self, *, raise_errors: bool = True, **summary: Any) -> None:
        """Close the engine (summary event, knobs restored), then every resource, the hardware last."""
        closers, self.closers = self.closers, []
        close_all([lambda: self.engine.close(**summary), *closers], raise_errors=raise_errors)


def build_job(
    options: JobOptions,
    parts: JobParts | None = None,
    *,
    policy: Policy,
    job_stats: JobStats,
    broadcast: Any = None,
    prior: EngineState | None = None,
    steps_done: int = 0,
    work_total_s: float | None = None,
    hardware_released: bool = False,
    drives_hardware: bool = True,
) -> Job:
    """Assemble the job ``options`` describe from ``parts``; ``prior`` is a relaunched job's saved state.

    ``drives_hardware=False``: no actuators, profiler or precision controller at all (``greentrain run``:
    the command it supervises owns its GPUs, advisory mode included)."""
    parts = parts or JobParts()
    clock = parts.clock or SystemClock()
    deadline = resolve_deadline(options.deadline, prior, clock.now())  # '+H' counts from now, not after set-up
    closers: list[Callable[[], Any]] = []
    try:
        opened = _open_resources(options, parts, clock, broadcast, job_stats, closers)
        hardware = _open_hardware(options, parts, policy, clock, opened) if drives_hardware else JobHardware()
        closers.append(hardware.close)  # last: knobs are restored after everything else stopped
        engine = Engine(
            policy, signals=opened["signals"], monitor=opened["monitor"], clock=clock,
            deadline=deadline, steps_total=options.steps_total,
            work_total_s=work_total_s, job_stats=job_stats, event_log=opened["event_log"],
            actuators=hardware.actuators, broadcast=broadcast, steps_done=steps_done,
            step_time_s=planning_step_time_s(prior, options.step_time_s),
            deadline_policy=options.deadline_policy, decide_interval_s=options.decide_interval_s,
            progress=options.progress, waiting_power_w=options.waiting_power_w,
            hardware_released=hardware_released,
            budget=Budget(max_emissions_g=options.max_emissions_g, max_energy_j=options.max_energy_j),
        )
    except BaseException:
        close_all(closers, raise_errors=False)
        raise
    engine.rate_probe = parts.rate_probe
    job = Job(engine=engine, hardware=hardware, closers=closers, **opened)
    try:
        recover = getattr(hardware.actuators, "recover", None)
        if callable(recover):  # restore what a killed predecessor left on the GPUs
            engine.guarded("actuators.recover", recover)
        if prior is not None:
            restore_into(engine, prior)
            if engine.submitted_at is not None and engine.is_leader:
                engine.signals.backfill(engine.submitted_at, clock.now(), engine.ledger)
    except BaseException:
        job.close(raise_errors=False)
        raise
    return job


def _open_resources(options: JobOptions, parts: JobParts, clock: Clock, broadcast: Any, job_stats: JobStats,
                    closers: list[Callable[[], Any]]) -> dict[str, Any]:
    """Run log, monitor, carbon signal (rank 0) and metrics endpoint; each one's closer kept in ``closers``."""
    from greentrain.events import EventLog

    event_log = EventLog(options.jsonl) if options.jsonl else None
    if event_log is not None:
        closers.append(event_log.close)
    monitor, devices = parts.monitor, parts.devices
    if monitor is None:
        monitor, found = build_monitor(parts.devices, event_log, clock)
        devices = parts.devices if parts.devices is not None else found
        if monitor is not None:
            closers.insert(0, monitor.stop)
    is_leader = broadcast is None or broadcast.is_leader
    signals = build_signals(options.zone, options.provider, clock) if is_leader else None
    if isinstance(options.provider, str | None) and callable(getattr(signals, "close", None)):
        closers.append(signals.close)  # built here from a spec: ours to close
    metrics = None
    if options.metrics_port is not None:
        extra: dict[str, Any] = {}
        if broadcast is not None and broadcast.world_size > 1:  # one endpoint per node aggregating its ranks
            extra["multiprocess_dir"] = Path(tempfile.gettempdir()) / f"greentrain-metrics-{options.job}"
        metrics = start_metrics(job=options.job, monitor=monitor, signals=signals, job_stats=job_stats,
                                addr=options.metrics_addr, port=options.metrics_port, clock=clock,
                                allow_public=options.metrics_allow_public, **extra)
        closers.insert(0, metrics.stop)
    return {"event_log": event_log, "monitor": monitor, "signals": signals, "metrics": metrics, "devices": devices}


def _open_hardware(options: JobOptions, parts: JobParts, policy: Policy, clock: Clock,
                   opened: dict[str, Any]) -> JobHardware:
    """Actuators, operating-point profiler and precision controller this job's options ask for."""
    from greentrain.actuators.advisory import resolve_actuation

    devices = opened["devices"]
    if devices is None and options.power is True:  # monitor= given alone: its devices may be simulated
        devices = discover_devices()
    return build_hardware(
        policy, list(getattr(devices, "gpus", None) or []), power=options.power, precision=options.precision,
        actuators=parts.actuators, profile_cache_dir=options.profile_cache_dir, state_dir=options.state_dir,
        job=options.job, clock=clock, model=parts.model, monitor=opened["monitor"],
        actuation=resolve_actuation(options.actuation),
    )


def resolve_deadline(value: datetime | str | None, prior: EngineState | None, now: datetime) -> datetime | None:
    """An aware deadline; '+H' counts from the job's first start (kept in ``prior``), not a relaunch."""
    relative = value is None or (isinstance(value, str) and value.strip().startswith("+"))
    if prior is not None and prior.deadline and relative:
        return EngineState.parse_time(prior.deadline)
    if value is None:
        return None
    if isinstance(value, datetime):
        return ensure_aware_utc(value, "deadline")
    return parse_deadline(str(value), now, param="deadline")


def planning_step_time_s(prior: EngineState | None, hint_s: float | None) -> float | None:
    """The step time to plan with before one is measured: the slower of the previous run's measurement and
    the caller's hint. A hint from a short timing on a loaded machine can be several times too fast, and a
    relaunch that trusted it would plan its wait as if the job were short."""
    known = [v for v in ((prior.step_time_s if prior else None), hint_s) if v]
    return max(known) if known else None
