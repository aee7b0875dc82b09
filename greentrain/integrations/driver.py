"""The engine wiring every framework integration shares (HF Trainer, Lightning, Accelerate).

A framework callback calls ``open`` when training starts, ``step_begin`` /
``step_end`` around each optimizer step, and ``close`` at the end. ``step_end``
returns True when the policy paused the job in *checkpoint* mode: the callback
then asks its framework to save and stop, and either the same process waits
(``wait_for_resume``) and trains again from the checkpoint, or it exits with
``PAUSED_EXIT_CODE`` for a scheduler to requeue. In *suspend* mode the pause
is a wait inside ``step_end`` and training simply goes on. The job's deadline
and totals live in a small state file beside the checkpoints, so a relaunched
process plans the rest of the same job. Rank 0 decides; every rank gets the
same decision at the same step (the engine's broadcast).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from greentrain.clock import Clock, SystemClock
from greentrain.errors import ConfigError
from greentrain.integrations.slurm import PAUSED_EXIT_CODE, write_resume_time
from greentrain.jobstats import JobStats
from greentrain.policies.base import Action, Decision, Policy

__all__ = ["GreenOptions", "StepDriver", "PAUSED_EXIT_CODE", "DriverStatus"]

log = logging.getLogger("greentrain.integrations")


@dataclass(slots=True, kw_only=True)
class GreenOptions:
    """What a user passes to any framework callback (see ``greentrain.session.Session`` for the same names)."""

    policy: str | Path | Policy = "carbon-aware"
    """Preset name, TOML path or Policy."""
    zone: str | None = None
    """Grid zone (e.g. 'GB'); with no zone and no provider the job runs now and records energy only."""
    provider: Any = None
    """Carbon source spec ('csv:PATH', 'electricitymaps', ...) or a SignalChain."""
    deadline: datetime | str | None = None
    """Aware datetime, ISO string with zone, or '+H' hours from the job's first start."""
    pause_mode: Literal["checkpoint", "suspend"] = "checkpoint"
    """checkpoint: save, stop the trainer, resume from the checkpoint; suspend: wait in-process."""
    clock: Clock | None = None
    job: str = "greentrain"
    jsonl: str | Path | None = None
    devices: Any = None
    """A DeviceSet; None discovers this machine's devices; False measures nothing."""
    metrics_port: int | None = None
    metrics_addr: str = "127.0.0.1"
    step_time_s: float | None = None
    decide_interval_s: float = 300.0
    deadline_policy: str | None = None
    progress: bool = True
    actuators: Any = None
    """An ``ActuatorSet`` to apply power/clock decisions (journaled, restored on close)."""
    actuation: Literal["apply", "advise"] | None = None
    """'advise': advisory mode, the actuators' GPUs get advice only (also ``GREENTRAIN_ADVISE_ONLY=1``)."""
    waiting_power_w: float | None = None
    """Draw while paused, watts, instead of the held devices' measured idle draw."""
    max_emissions_g: float | None = None
    """Carbon budget, grams CO2eq: warned once when projected over; when spent, checkpoint and stop."""
    max_energy_j: float | None = None
    """Energy budget, joules (as ``max_emissions_g``)."""
    stop_signals: tuple[int, ...] = ()
    """Signals that make the job checkpoint and stop at the next step boundary, e.g.
    ``(signal.SIGTERM, signal.SIGUSR1)``: a Kubernetes suspend, Slurm's ``--signal`` before the time limit."""

    def __post_init__(self) -> None:
        if self.pause_mode not in ("checkpoint", "suspend"):
            raise ConfigError(f"pause_mode: {self.pause_mode!r} is not 'checkpoint' or 'suspend'")


class StepDriver:
    """Owns one Engine across the framework's train calls and process relaunches."""

    def __init__(self, options: GreenOptions) -> None:
        self.options = options
        self.clock = options.clock or SystemClock()
        self.engine: Any = None
        self.job_stats = JobStats(job=options.job)
        self.resume_at: datetime | None = None
        """Set by a checkpoint-mode pause: when to train again."""
        self.paused = False
        self.stopped_by_signal = False
        """The last stop came from one of ``stop_signals`` (no resume time: relaunch when the scheduler does)."""
        self.budget_spent = False
        """The last stop came from a spent budget (``greentrain.engine.budget``): do not relaunch."""
        self._closers: list[Any] = []
        self._stop_requested = False
        self._previous_handlers: dict[int, Any] = {}

    # ---- lifecycle -----------------------------------------------------------------------------

    def open(self, *, steps_total: int | None, steps_done: int, prior: Any = None) -> Decision:
        """Start (or continue) the job at ``steps_done``; waits out a delayed start.

        ``prior`` is the ``EngineState`` saved with the checkpoint being resumed (deadline, totals).
        """
        if self.engine is None:
            try:
                self._build(steps_total, steps_done, prior)
            except BaseException:
                self.close()  # stop whatever was already started (monitor, metrics server)
                raise
            self._install_signal_handlers()
        else:  # same process, training again after a checkpoint pause
            self.engine.steps_done = steps_done
        self.paused = self.stopped_by_signal = False
        self.resume_at = None
        decision = self.engine.begin()
        if decision.action is not Action.RUN:
            self.engine.wait_until(decision.until, decision.reason or "delayed start")
        return decision

    def _build(self, steps_total: int | None, steps_done: int, prior: Any) -> None:
        from greentrain.engine import Engine
        from greentrain.events import EventLog
        from greentrain.policies import load_policy
        from greentrain.engine.broadcast import auto_broadcast
        from greentrain.engine.budget import Budget
        from greentrain.job.resources import build_monitor, build_signals, start_metrics
        from greentrain.job.state import restore_into

        o = self.options
        broadcast = auto_broadcast()
        event_log = EventLog(o.jsonl) if o.jsonl else None
        if event_log is not None:
            self._closers.append(event_log.close)
        monitor, _ = build_monitor(o.devices, event_log, self.clock)
        if monitor is not None:
            self._closers.insert(0, monitor.stop)
        signals = build_signals(o.zone, o.provider, self.clock) if broadcast.is_leader else None
        if o.metrics_port is not None:
            server = start_metrics(job=o.job, monitor=monitor, signals=signals, job_stats=self.job_stats,
                                   addr=o.metrics_addr, port=o.metrics_port, clock=self.clock)
            self._closers.insert(0, server.stop)
        self.engine = Engine(
            load_policy(o.policy), signals=signals, monitor=monitor, clock=self.clock,
            deadline=self._deadline(prior), steps_total=steps_total, job_stats=self.job_stats,
            event_log=event_log, broadcast=broadcast, steps_done=steps_done,
            step_time_s=o.step_time_s or (prior.step_time_s if prior else None),
            deadline_policy=o.deadline_policy, decide_interval_s=o.decide_interval_s, progress=o.progress,
            actuators=self._actuators(), waiting_power_w=o.waiting_power_w,
            budget=Budget(max_emissions_g=o.max_emissions_g, max_energy_j=o.max_energy_j),
        )
        recover = getattr(self.engine.actuators, "recover", None)
        if callable(recover):  # restore what a killed predecessor left on the GPUs
            self.engine.guarded("actuators.recover", recover)
        if prior is not None:
            restore_into(self.engine, prior)

    def _actuators(self) -> Any:
        """The options' actuators, or in advisory mode an ``AdvisoryActuators`` over the same GPUs (no writes)."""
        from greentrain.actuators.advisory import AdvisoryActuators, resolve_actuation

        given = self.options.actuators
        if given is None or resolve_actuation(self.options.actuation) == "apply":
            return given
        return AdvisoryActuators(getattr(given, "gpus", []), precision=getattr(given, "precision", None))

    def _deadline(self, prior: Any) -> datetime | None:
        from greentrain.job.resolve import resolve_deadline  # '+H' counts from the job's first start

        return resolve_deadline(self.options.deadline, prior, self.clock.now())

    # ---- step boundary -------------------------------------------------------------------------

    def step_begin(self) -> None:
        """Mark the start of an optimizer step."""
        if self.engine is not None:
            self.engine.step_begin()

    def step_end(self, tokens: int = 0, loss: Any = None) -> bool:
        """Close the step; True means 'checkpoint pause: save and stop the trainer now'."""
        engine = self.engine
        if engine is None:
            return False
        decision = engine.step_end(tokens=tokens, loss=loss)
        if self._stop_requested or decision.action is Action.STOP:  # a signal, or a spent budget: no resume
            self.budget_spent = decision.action is Action.STOP
            return self._stop_for_signal()
        if decision.action is Action.RUN or engine.finished:
            return False
        if self.options.pause_mode == "suspend":
            engine.wait_until(decision.until, decision.reason or "paused")
            return self._stop_for_signal() if self._stop_requested else False
        self.paused = True
        self.resume_at = decision.until
        if engine.is_leader:
            write_resume_time(decision.until)  # for the Slurm template's requeue (no-op elsewhere)
        return True

    def _stop_for_signal(self) -> bool:
        self._stop_requested = False
        self.paused = self.stopped_by_signal = True
        self.resume_at = None
        return True

    def _install_signal_handlers(self) -> None:
        import signal

        for signum in self.options.stop_signals:
            self._previous_handlers[signum] = signal.signal(signum, self._on_stop_signal)

    def _on_stop_signal(self, signum: int, frame: Any) -> None:
        # Only set flags here: the checkpoint is written at the next step boundary, by the framework.
        self._stop_requested = True
        if self.engine is not None:
            self.engine.interrupt()  # end a suspend-mode wait at once

    def state(self) -> Any:
        """The job's deadline and totals as an ``EngineState``, to save with a checkpoint (None before open)."""
        engine = self.engine
        if engine is None:
            return None
        from greentrain.job.state import state_of

        return state_of(engine, self.options.job, resume_at=self.resume_at, finished=engine.finished)

    def wait_for_resume(self) -> bool:
        """After a checkpoint pause: block until the planned resume time; False if interrupted."""
        if self.engine is None or not self.paused:
            return True
        if self.stopped_by_signal:
            return False  # the process is being stopped from outside: leave the resume to the scheduler
        return not self.engine.wait_until(self.resume_at, "checkpoint pause")

    def close(self) -> None:
        """Restore hardware settings, write the summary, stop helpers; safe to call twice."""
        closers, self._closers = self._closers, []
        engine, self.engine = self.engine, None
        if self._previous_handlers:
            import signal

            for signum, handler in self._previous_handlers.items():
                signal.signal(signum, handler)
            self._previous_handlers.clear()
        try:
            if engine is not None:
                engine.close()
        finally:
            for close in closers:
                try:
                    close()
                except Exception as e:  # close everything even if one part fails
                    log.warning("greentrain: closing %s failed: %s", close, e)


class DriverStatus:
    """Pause status read through a callback's ``driver`` (shared by the framework callbacks)."""

    driver: StepDriver

    @property
    def paused(self) -> bool:
        """The last training call returned because the policy paused the job."""
        return self.driver.paused

    @property
    def stopped_by_signal(self) -> bool:
        """The last stop came from one of ``stop_signals`` (the scheduler relaunches; nothing to wait for)."""
        return self.driver.stopped_by_signal

    @property
    def resume_at(self) -> datetime | None:
        """When the paused job plans to resume."""
        return self.driver.resume_at
