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
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from greentrain.clock import Clock, SystemClock, ensure_aware_utc, parse_deadline
from greentrain.device.discovery import DeviceSet, NoDevices
from greentrain.engine import Collaborators, DeadlineGuard, Engine, NoMonitor, PauseCost, Progress
from greentrain.engine.broadcast import Broadcast, LocalBroadcast
from greentrain.engine.budget import Budget
from greentrain.engine.collaborators import Actuators, CarbonSignal, Closable, EnergyMonitor, Recovers
from greentrain.engine.scaler import ReplicaScaler, Scaling
from greentrain.events import EventLog, NoEventLog
from greentrain.codecarbon import check_target
from greentrain.job.codecarbon_row import CodeCarbonRecorder
from greentrain.job.hardware import JobHardware, build_hardware, discover_devices
from greentrain.job.options import JobOptions
from greentrain.job.resources import build_monitor, build_signals, close_all, start_metrics
from greentrain.job.state import EngineState, deadline_spec, restore_into
from greentrain.jobstats import JobStats
from greentrain.policies.base import Decision, Policy
from greentrain.signals.chain import SignalChain

if TYPE_CHECKING:
    from torch.nn import Module

    from greentrain.exporters.server import MetricsServer

__all__ = ["Job", "JobParts", "build_job", "resolve_deadline", "planning_step_time_s"]


@dataclass(kw_only=True)
class JobParts:
    """The objects a job is built from (not settings; those are ``JobOptions``). All optional."""

    clock: Clock | None = None
    """The job clock (``ReplayClock`` for demos and tests); default: the system clock."""
    devices: DeviceSet | Literal[False] | None = None
    """A ``DeviceSet``; None discovers this machine's devices; ``NoDevices()`` (or False) measures nothing."""
    actuators: Actuators | None = None
    """Your own ``ActuatorSet`` (default: built when power or precision control is on)."""
    monitor: EnergyMonitor | None = None
    """Your own started ``Monitor`` (default: one over ``devices``, stopped at close)."""
    model: Module | None = None
    """The model: its fingerprint keys the operating-point cache."""
    rate_probe: Callable[[], float | None] | None = None
    """``() -> seconds per step`` asked at re-plans while waiting: a busier machine resumes sooner."""

    def __post_init__(self) -> None:
        if self.devices is False:  # the documented spelling; inside, the null object
            self.devices = NoDevices()


@dataclass(kw_only=True)
class Job:
    """An assembled job: the engine and what it was built from, closed together by ``close``."""

    engine: Engine
    hardware: JobHardware
    event_log: EventLog = field(default_factory=NoEventLog)
    monitor: EnergyMonitor = field(default_factory=NoMonitor)
    signals: CarbonSignal | None = None
    metrics: MetricsServer | None = None
    """The running ``MetricsServer`` (its bound port in ``.port``), or None."""
    devices: DeviceSet | None = None
    closers: list[Callable[[], object]] = field(default_factory=list)
    options: JobOptions = field(default_factory=JobOptions)
    """The settings it was built from (the plan line names its policy, zone and provider)."""
    policy_name: str = ""
    begun: bool = False
    """``begin`` succeeded: the plan was said, and ``close`` says the summary."""

    @property
    def speaks(self) -> bool:
        """This process says the plan and summary: rank 0, unless the job is ``quiet``."""
        return self.engine.is_leader and not self.options.quiet

    def begin(self, pause_mode: str | None = None) -> Decision:
        """``Engine.begin`` (the deadline's one check), then the plan line, once per job."""
        decision = self.engine.begin()
        if not self.begun and self.speaks:
            from greentrain.job.announce import plan_text, say

            say(plan_text(self.engine, policy=self.policy_name, zone=self.options.zone,
                          provider_spec=self.options.provider, metrics_url=self.metrics.url if self.metrics else None,
                          pause_mode=pause_mode))
        self.begun = True
        return decision

    def close(self, *, raise_errors: bool = True, finished: bool | None = None,
              finished_at: datetime | None = None, resume_at: datetime | None = None, **summary: object) -> None:
        """Close the engine (summary event, knobs restored), say the summary line, then close every resource,
        the hardware last. ``resume_at``: a checkpoint pause's planned resume (the summary says so)."""
        closers, self.closers = self.closers, []
        said, self.begun = self.begun and self.speaks, False

        def summarize() -> None:
            if said:
                from greentrain.job.announce import energy_sources, say, summary_text

                status, lost_j = summary.get("exit_status"), summary.get("lost_energy_j")
                done = finished if finished is not None else self.engine.finished
                say(summary_text(self.engine, sources=energy_sources(self.monitor), finished=done,
                                 exit_status=status if isinstance(status, int) else None, paused_until=resume_at,
                                 lost_energy_j=float(lost_j) if isinstance(lost_j, int | float) else None))

        close_all([lambda: self.engine.close(finished=finished, finished_at=finished_at, **summary), summarize,
                   *closers], raise_errors=raise_errors)


@dataclass(kw_only=True)
class _Opened:
    """What ``_open_resources`` started, each closed by a closer it registered."""

    event_log: EventLog
    monitor: EnergyMonitor
    signals: CarbonSignal | None
    metrics: MetricsServer | None
    devices: DeviceSet | None


def build_job(
    options: JobOptions,
    parts: JobParts | None = None,
    *,
    policy: Policy,
    job_stats: JobStats,
    broadcast: Broadcast | None = None,
    prior: EngineState | None = None,
    steps_done: int = 0,
    work_total_s: float | None = None,
    hardware_released: bool = False,
    drives_hardware: bool = True,
    scaler: ReplicaScaler | None = None,
) -> Job:
    """Assemble the job ``options`` describe from ``parts``; ``policy`` is ``options.policy`` loaded (once,
    by the front end); ``prior`` is a relaunched job's saved state.

    ``drives_hardware=False``: no actuators, profiler or precision controller at all (``greentrain run``:
    the command it supervises owns its GPUs, advisory mode included).

    ``scaler``: an elastic job's replica actuator (carbon scaling, ``greentrain.engine.scaling``): the policy
    also picks the replica count, within ``options.min_replicas``/``max_replicas``; None: a fixed-size job."""
    parts = parts or JobParts()
    broadcast = broadcast or LocalBroadcast()
    clock = parts.clock or SystemClock()
    deadline = resolve_deadline(options.deadline, prior, clock.now())  # the one place it is normalised
    if broadcast.is_leader:
        _say_deadline_change(prior, deadline, clock.simulated)
    if options.codecarbon_csv is not None and broadcast.is_leader:
        check_target(options.codecarbon_csv)  # before any work: a path that cannot take the row is bad input
    closers: list[Callable[[], object]] = []
    try:
        opened = _open_resources(options, parts, clock, broadcast, job_stats, closers)
        hardware = _open_hardware(options, parts, policy, clock, opened) if drives_hardware else JobHardware()
        closers.append(hardware.close)  # last: knobs are restored after everything else stopped
        settings = policy.settings
        engine = Engine(
            policy,
            Collaborators(clock=clock, signals=opened.signals, monitor=opened.monitor, actuators=hardware.actuators,
                          event_log=opened.event_log, broadcast=broadcast, job_stats=job_stats),
            progress=Progress(steps_total=options.steps_total, work_total_s=work_total_s, steps_done=steps_done,
                              step_time_s=planning_step_time_s(prior, options.step_time_s),
                              rate_probe=parts.rate_probe, estimate_error=options.estimate_error),
            deadline=DeadlineGuard.for_policy(deadline, settings, policy=options.deadline_policy,
                                              simulated=clock.simulated, speedup=clock.speedup),
            pause_cost=PauseCost.for_policy(settings, user_w=options.waiting_power_w, released=hardware_released),
            budget=Budget(max_emissions_g=options.max_emissions_g, max_energy_j=options.max_energy_j),
            decide_interval_s=options.decide_interval_s, countdown=options.progress,
            min_wait_saving=options.min_wait_saving,
            scaling=_scaling(options, scaler),
        )
    except BaseException:
        close_all(closers, raise_errors=False)
        raise
    if scaler is not None:
        job_stats.update(replicas_actual=scaler.replicas)
        engine.event("replicas", kind="actual", replicas=scaler.replicas)
    job = Job(engine=engine, hardware=hardware, closers=closers, event_log=opened.event_log,
              monitor=opened.monitor, signals=opened.signals, metrics=opened.metrics, devices=opened.devices,
              options=options, policy_name=_policy_name(options.policy, policy))
    try:
        if isinstance(hardware.actuators, Recovers):  # restore what a killed predecessor left on the GPUs
            engine.guarded("actuators.recover", hardware.actuators.recover)
        if prior is not None:
            restore_into(engine, prior)
            submitted_at = engine.progress.submitted_at
            if submitted_at is not None and engine.is_leader:
                engine.signals.backfill(submitted_at, clock.now(), engine.ledger)
        if options.codecarbon_csv is not None and engine.is_leader:  # after restore: this process's share
            recorder = CodeCarbonRecorder(options.codecarbon_csv, engine, opened.monitor, job=options.job,
                                          zone=options.zone or _zone(opened.signals))
            job.closers.insert(0, recorder.write)  # right after the engine's close: its totals are final
    except BaseException:
        job.close(raise_errors=False)
        raise
    return job


def _scaling(options: JobOptions, scaler: ReplicaScaler | None) -> Scaling | None:
    """An elastic job's replica actuator with the range its options allow (None: a fixed-size job)."""
    if scaler is None:
        return None
    return Scaling(scaler=scaler, min_replicas=options.min_replicas, max_replicas=options.max_replicas)


def _open_resources(options: JobOptions, parts: JobParts, clock: Clock, broadcast: Broadcast, job_stats: JobStats,
                    closers: list[Callable[[], object]]) -> _Opened:
    """Run log, monitor, carbon signal (rank 0) and metrics endpoint; each one's closer kept in ``closers``."""
    event_log: EventLog = EventLog(options.jsonl) if options.jsonl else NoEventLog()
    closers.append(event_log.close)
    given = parts.devices if parts.devices is not False else NoDevices()  # as __post_init__ left it
    monitor, devices = parts.monitor, given
    if monitor is None:
        monitor, found = build_monitor(given, event_log, clock)
        devices = given if given is not None else found
        closers.insert(0, monitor.stop)
    signals = build_signals(options.zone, options.provider, clock) if broadcast.is_leader else None
    if isinstance(options.provider, str | None) and isinstance(signals, Closable):
        closers.append(signals.close)  # built here from a spec: ours to close
    metrics = None
    if options.metrics_port is not None:
        extra: dict[str, Path] = {}
        if broadcast.world_size > 1:  # one endpoint per node aggregating its ranks
            extra["multiprocess_dir"] = Path(tempfile.gettempdir()) / f"greentrain-metrics-{options.job}"
        metrics = start_metrics(job=options.job, monitor=monitor, signals=signals, job_stats=job_stats,
                                addr=options.metrics_addr, port=options.metrics_port, clock=clock,
                                allow_public=options.metrics_allow_public, **extra)
        closers.insert(0, metrics.stop)
    return _Opened(event_log=event_log, monitor=monitor, signals=signals, metrics=metrics,
                   devices=devices if isinstance(devices, DeviceSet) else None)


def _open_hardware(options: JobOptions, parts: JobParts, policy: Policy, clock: Clock,
                   opened: _Opened) -> JobHardware:
    """Actuators, operating-point profiler and precision controller this job's options ask for."""
    from greentrain.actuators.advisory import resolve_actuation

    devices = opened.devices
    if devices is None and options.power is True:  # monitor= given alone: its devices may be simulated
        devices = discover_devices()
    return build_hardware(
        policy, list(devices.gpus) if devices is not None else [], power=options.power, precision=options.precision,
        actuators=parts.actuators, profile_cache_dir=options.profile_cache_dir, state_dir=options.state_dir,
        job=options.job, clock=clock, model=parts.model, monitor=opened.monitor,
        actuation=resolve_actuation(options.actuation),
    )


def _policy_name(spec: object, policy: Policy) -> str:
    """A preset's name, a file's name, or the policy's own."""
    if isinstance(spec, str | Path) and not isinstance(spec, Policy):
        return Path(spec).name if str(spec).endswith(".toml") else str(spec)
    return str(policy.name)


def _zone(signals: CarbonSignal | None) -> str | None:
    """The zone a chain reads (None: no chain)."""
    return signals.zone if isinstance(signals, SignalChain) else None


def resolve_deadline(value: datetime | str | None, prior: EngineState | None, now: datetime) -> datetime | None:
    """An aware deadline; '+H' counts from the job's first start (kept in ``prior``), not a relaunch. The
    stored deadline is kept when none is given or the same value is given again (a relaunch's own command
    line); a different one given on a restart wins, '+H' then counting from now."""
    if prior is not None and prior.deadline:
        if prior.deadline_given is not None:  # the state knows what was given: only another value replaces it
            keep = value is None or deadline_spec(value) == prior.deadline_given
        else:  # written before it did: a relative or absent one keeps it
            keep = value is None or (isinstance(value, str) and value.strip().startswith("+"))
        if keep:
            return EngineState.parse_time(prior.deadline)
    if value is None:
        return None
    if isinstance(value, datetime):
        return ensure_aware_utc(value, "deadline")
    return parse_deadline(str(value), now, param="deadline")


def _say_deadline_change(prior: EngineState | None, deadline: datetime | None, simulated: bool) -> None:
    """One line when the deadline given on a restart replaces the one the job's state kept."""
    stored = EngineState.parse_time(prior.deadline) if prior is not None and prior.deadline else None
    if stored is None or deadline is None or deadline == stored:
        return
    from greentrain.job.announce import say
    from greentrain.units import format_time

    say(f"greentrain: deadline {format_time(deadline, simulated=simulated)} (given now) replaces "
        f"{format_time(stored, simulated=simulated)} (kept in the job's state)")


def planning_step_time_s(prior: EngineState | None, hint_s: float | None) -> float | None:
    """The step time to plan with before one is measured: the slower of the previous run's measurement and
    the caller's hint. A hint from a short timing on a loaded machine can be several times too fast, and a
    relaunch that trusted it would plan its wait as if the job were short."""
    known = [v for v in ((prior.step_time_s if prior else None), hint_s) if v]
    return max(known) if known else None
