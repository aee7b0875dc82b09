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

import dataclasses
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Literal, TypeAlias, Unpack, cast

from greentrain.clock import Clock, SystemClock
from greentrain.device.discovery import DeviceSet
from greentrain.engine.collaborators import Actuators, EnergyMonitor
from greentrain.errors import ConfigError
from greentrain.integrations.slurm import PAUSED_EXIT_CODE, write_resume_time
from greentrain.job.build import JobParts
from greentrain.job.options import JobOptions, JobSettings, PolicySpec, unknown_settings
from greentrain.jobstats import JobStats
from greentrain.policies.base import Action, Decision

if TYPE_CHECKING:
    from types import FrameType

    from torch.nn import Module

    from greentrain.engine import Engine
    from greentrain.engine.collaborators import Loss
    from greentrain.job.build import Job
    from greentrain.job.state import EngineState
else:
    Module = object  # CallbackKeywords' hints resolve at run time without importing torch

SignalHandler: TypeAlias = "Callable[[int, FrameType | None], object] | int | None"
"""What ``signal.signal`` hands back: a function, SIG_DFL/SIG_IGN, or None (set outside Python)."""

__all__ = ["StepDriver", "PAUSED_EXIT_CODE", "DriverStatus", "CallbackKeywords", "callback_job", "saved_prior"]

log = logging.getLogger("greentrain.integrations")


class CallbackKeywords(JobSettings, total=False):
    """A framework callback's keywords: every setting (``JobSettings``) and every part (``JobParts``'s fields).
    Written out for the type checker; a test holds it to both."""

    clock: Clock | None
    devices: DeviceSet | Literal[False] | None
    actuators: Actuators | None
    monitor: EnergyMonitor | None
    model: Module | None
    rate_probe: Callable[[], float | None] | None


PART_NAMES = tuple(f.name for f in dataclasses.fields(JobParts))
"""Callback keywords that are objects (``JobParts``), not settings (``JobOptions``)."""


def callback_job(policy: PolicySpec | None = None, /,
                 **keywords: Unpack[CallbackKeywords]) -> tuple[JobOptions, JobParts]:
    """A callback's keywords split into ``JobOptions`` and ``JobParts`` (``pause_mode`` defaults to checkpoint).

    ``policy`` comes first or as a keyword (``CallbackKeywords`` has it), not both.
    """
    if policy is not None and "policy" in keywords:
        raise TypeError("got multiple values for argument 'policy'")
    # What is left without the parts is JobSettings (CallbackKeywords is JobSettings and the parts).
    settings = cast(JobSettings, {k: v for k, v in keywords.items() if k not in PART_NAMES})
    for name, why in unknown_settings(settings):
        raise ConfigError(f"{name}: not an option of greentrain's callbacks ({why})")
    if policy is not None:
        settings["policy"] = policy
    settings.setdefault("pause_mode", "checkpoint")
    parts = JobParts(clock=keywords.get("clock"), devices=keywords.get("devices"),
                     actuators=keywords.get("actuators"), monitor=keywords.get("monitor"),
                     model=keywords.get("model"), rate_probe=keywords.get("rate_probe"))
    options = JobOptions(**settings)
    problems = options.callback_problems()
    if problems:
        raise ConfigError("\n".join(f"{name}: {why}" for name, why in problems))
    return options, parts


def saved_prior(saved: object) -> EngineState | None:
    """The ``EngineState`` a callback's ``state_dict`` saved under 'engine' (None when it saved none)."""
    from greentrain.job.state import EngineState

    return EngineState(**saved) if isinstance(saved, dict) and saved else None


class StepDriver:
    """Owns one job (``greentrain.job.build_job``) across the framework's train calls and process relaunches."""

    def __init__(self, options: JobOptions, parts: JobParts | None = None) -> None:
        self.options = options
        self.parts = parts if parts is not None else JobParts()
        self.clock = self.parts.clock or SystemClock()
        self.parts.clock = self.clock
        self.pause_mode = options.pause_mode or "checkpoint"
        """'checkpoint' or 'suspend'."""
        self.job: Job | None = None
        """The ``greentrain.job.build.Job`` while training (engine, hardware, resources)."""
        self.engine: Engine | None = None
        self.job_stats = JobStats(job=options.job)
        self.resume_at: datetime | None = None
        """Set by a checkpoint-mode pause: when to train again."""
        self.paused = False
        self.stopped_by_signal = False
        """The last stop came from one of ``stop_signals`` (no resume time: relaunch when the scheduler does)."""
        self.budget_spent = False
        """The last stop came from a spent budget (``greentrain.engine.budget``): do not relaunch."""
        self._stop_requested = False
        self._previous_handlers: dict[int, SignalHandler] = {}
        self._hardware_started = False
        self._autocast: AbstractContextManager[None] | None = None

    # ---- lifecycle -----------------------------------------------------------------------------

    def open(self, *, steps_total: int | None, steps_done: int, prior: EngineState | None = None) -> Decision:
        """Start (or continue) the job at ``steps_done``; waits out a delayed start.

        ``prior`` is the ``EngineState`` saved with the checkpoint being resumed (deadline, totals).
        """
        job = self.job
        if job is None:
            try:
                job = self._build(steps_total, steps_done, prior)
            except BaseException:
                self.close()  # stop whatever was already started (monitor, metrics server)
                raise
            self._install_signal_handlers()
        else:  # same process, training again after a checkpoint pause
            job.engine.continue_at(steps_done)
        self.paused = self.stopped_by_signal = False
        self.resume_at = None
        decision = job.begin(self.pause_mode)
        if decision.action is not Action.RUN:
            job.engine.wait_until(decision.until, decision.reason or "delayed start")
        return decision

    def _build(self, steps_total: int | None, steps_done: int, prior: EngineState | None) -> Job:
        from greentrain.engine.broadcast import auto_broadcast
        from greentrain.job.build import build_job
        from greentrain.policies.loader import load_policy

        options = self.options
        if steps_total is not None:
            options = options.replace(steps_total=steps_total)  # the trainer's count
        self.job = build_job(options, self.parts, policy=load_policy(options.policy),
                             job_stats=self.job_stats, broadcast=auto_broadcast(), prior=prior,
                             steps_done=steps_done)
        self.engine = self.job.engine
        self._hardware_started = False
        return self.job

    # ---- precision -----------------------------------------------------------------------------

    @property
    def precision(self) -> str | None:
        """The precision in use ('fp32', 'bf16', ...), or None without ``precision=``."""
        controller = self.job.hardware.precision if self.job is not None else None
        return controller.current if controller is not None else None

    @contextmanager
    def autocast(self) -> Iterator[None]:
        """Context for the forward pass at the current precision (a no-op without ``precision=``)."""
        controller = self.job.hardware.precision if self.job is not None else None
        with controller.autocast() if controller is not None else nullcontext():
            yield

    def _enter_autocast(self) -> None:
        if self.precision is not None and self._autocast is None:
            self._autocast = self.autocast()
            self._autocast.__enter__()

    def _exit_autocast(self) -> None:
        context, self._autocast = self._autocast, None
        if context is not None:
            context.__exit__(None, None, None)

    # ---- step boundary -------------------------------------------------------------------------

    def step_begin(self, *, autocast: bool = False) -> None:
        """Mark the start of an optimizer step; ``autocast``: run it at the current precision until
        ``step_end`` (framework callbacks, whose training step greentrain does not wrap)."""
        job = self.job
        if job is None:
            return
        engine = job.engine
        engine.step_begin()
        if self._hardware_started:
            job.hardware.step_begin(engine)
        else:  # notes, advisory points, the profiler's first bracket
            self._hardware_started = True
            job.hardware.start(engine)
        if autocast:
            self._enter_autocast()

    def step_end(self, tokens: int = 0, loss: Loss = None) -> bool:
        """Close the step; True means 'checkpoint pause: save and stop the trainer now'."""
        job = self.job
        if job is None:
            return False
        engine = job.engine
        self._exit_autocast()
        decision = engine.step_end(tokens=tokens, loss=loss)
        job.hardware.step_end(engine, loss)  # the profiler's sweep, the precision trial
        if self._stop_requested or decision.action is Action.STOP:  # a signal, or a spent budget: no resume
            self.budget_spent = decision.action is Action.STOP
            return self._stop_for_signal()
        if decision.action is Action.RUN or engine.finished:
            return False
        if self.pause_mode == "suspend":
            engine.wait_until(decision.until, decision.reason or "paused")
            return self._stop_for_signal() if self._stop_requested else False
        self.paused = True
        self.resume_at = engine.resume_of(decision) or decision.until  # the resume the terminal gives
        if engine.is_leader:
            write_resume_time(self.resume_at)  # for the Slurm template's requeue (no-op elsewhere)
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

    def _on_stop_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only set flags here: the checkpoint is written at the next step boundary, by the framework.
        self._stop_requested = True
        if self.engine is not None:
            self.engine.interrupt()  # end a suspend-mode wait at once

    def state(self) -> EngineState | None:
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
        self._exit_autocast()
        job, self.job, self.engine = self.job, None, None
        if self._previous_handlers:
            import signal

            for signum, handler in self._previous_handlers.items():
                signal.signal(signum, handler)
            self._previous_handlers.clear()
        if job is not None:
            job.close(raise_errors=False, resume_at=self.resume_at)  # every part closed; failures logged


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
