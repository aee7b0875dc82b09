"""The plain-loop API: wrap an existing training loop in a few lines.

```python
with Session(policy="carbon-aware", zone="GB", deadline="+12", steps_total=1000,
             model=model, optimizer=opt, checkpoint_dir="ckpt") as session:
    for step in range(session.start_step, 1000):
        loss = train_step()
        session.step(tokens=4096, loss=loss)   # measure, decide, maybe pause
        if session.should_stop:                # checkpoint-mode pause: leave the loop
            break
```

``session.step`` marks a step boundary; decisions apply only there. In
``suspend`` mode a pause waits inside ``step``; in ``checkpoint`` mode the
session saves (your ``save(step)`` or the default model/optimizer checkpoint,
with the objects registered in ``state=``), sets ``should_stop``, and on
leaving the ``with`` block waits for the planned time and relaunches the script
(``relaunch="exec"``), exits for a scheduler to requeue (``"exit"``), or just
returns (``"none"``; the next Session resumes).

The job's state file moves with the checkpoints (``greentrain.job.commit``):
a process that ends between checkpoints leaves the last checkpoint's progress
and counts its own work since as lost. Ctrl-C anywhere inside the session
says one line and exits 130; the next start resumes from the last checkpoint.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Unpack

from greentrain.clock import Clock, SystemClock
from greentrain.device.discovery import DeviceSet
from greentrain.engine import Engine
from greentrain.engine.broadcast import Broadcast, make_broadcast
from greentrain.engine.budget import BUDGET_EXIT_CODE
from greentrain.engine.collaborators import Actuators, EnergyMonitor
from greentrain.engine.pausemode import auto_mode
from greentrain.engine.scaler import ReplicaScaler
from greentrain.errors import ConfigError, Interrupted
from greentrain.exitcodes import DEADLINE_MISSED_EXIT_CODE, INTERRUPTED_EXIT_CODE, RESUME_EXIT_CODE
from greentrain.job.build import Job, JobParts, build_job
from greentrain.job.checkpoint import JobCheckpoint
from greentrain.job.commit import StateKeeper, deferred_interrupt, interrupt_line
from greentrain.job.state import EngineState
from greentrain.job.hardware import JobHardware
from greentrain.job.options import JobOptions, PolicySpec, SessionSettings, unknown_settings
from greentrain.job.process import reexec
from greentrain.job.resolve import STATE_ENV, default_state_path, fresh_exec_state_path, resolve_pause_mode
from greentrain.job.resources import close_all
from greentrain.job.rngstate import RNGState
from greentrain.job.announce import say
from greentrain.jobstats import JobStats
from greentrain.policies.base import Action, Decision
from greentrain.policies.loader import load_policy

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup
    from torch.nn import Module
    from torch import Tensor
    from torch.optim import Optimizer

    from greentrain.exporters.server import MetricsServer

__all__ = ["Session", "RESUME_EXIT_CODE", "INTERRUPTED_EXIT_CODE"]  # both re-exported from greentrain.exitcodes


class Session:
    """Context manager driving one training job's step boundaries. See the module docstring.

    The keywords besides the objects below are the job's settings: the fields of
    ``greentrain.job.options.JobOptions`` (``zone``, ``provider``, ``deadline``, ``steps_total``, ``pause_mode``,
    ``relaunch``, ``checkpoint_dir``, ``power``, ``precision``, budgets, metrics, ...), each documented and checked
    there, one line naming the field. The job is assembled by ``greentrain.job.build.build_job`` at ``__enter__``.

    Args:
        policy: preset name, TOML path or ``Policy`` (the ``policy`` setting, also positional).
        save / load: your checkpoint functions (``save(next_step)``, ``load() -> next_step | None``);
            or ``model`` + ``optimizer`` + ``checkpoint_dir=`` for the default checkpoint.
        state: your own objects to save and restore with the default checkpoint, by name: anything with
            ``state_dict()``/``load_state_dict()`` (LR scheduler, GradScaler, sampler) or a plain ``dict``
            (restored in place); restored before the first step (``greentrain.job.userstate``).
        model: the model: the default checkpoint's, and the key of the operating-point cache.
        dist: a torch.distributed group (auto when initialised) or a ``Broadcast``.
        clock: job clock (``ReplayClock`` for demos/tests). devices: a ``DeviceSet`` (default:
            ``greentrain.device.discover()``; False: measure nothing). actuators / monitor: your own
            ``ActuatorSet`` (default: built when power is on) / started ``Monitor`` (default: over ``devices``).
        rate_probe: ``() -> s per step`` (job clock) asked at re-plans while waiting: a busier machine resumes sooner.

    Carbon scaling: set ``session.scaler`` to an elastic job's replica actuator
    (``greentrain.engine.scaling.ReplicaScaler``) before entering; the policy then also picks the replica count
    (within ``min_replicas``/``max_replicas``) and ``scaler.request(n, reason)`` is asked to change it.

    With ``precision=``, use ``session.autocast()`` and ``session.backward(loss, optimizer)`` in the loop. A budget
    that is spent exits with ``BUDGET_EXIT_CODE`` (4) under relaunch 'exec'/'exit'; a late finish makes
    ``deadline_exit_code`` 3 unless the deadline policy is best-effort.
    """

    def __init__(
        self,
        policy: PolicySpec | None = None,
        *,
        save: Callable[[int], None] | None = None,
        load: Callable[[], int | None] | None = None,
        model: Module | None = None,
        optimizer: Optimizer | None = None,
        state: Mapping[str, object] | None = None,
        dist: ProcessGroup | Broadcast | None = None,
        clock: Clock | None = None,
        devices: DeviceSet | Literal[False] | None = None,
        actuators: Actuators | None = None,
        monitor: EnergyMonitor | None = None,
        rate_probe: Callable[[], float | None] | None = None,
        **settings: Unpack[SessionSettings],
    ) -> None:
        from greentrain.actuators.advisory import resolve_actuation

        for name, why in unknown_settings(settings, "session"):
            raise TypeError(f"Session(): {name}: {why}")
        settings["actuation"] = resolve_actuation(settings.get("actuation"))  # this call's own dict
        self.options = JobOptions(**settings) if policy is None else JobOptions(policy=policy, **settings)
        """This job's settings (validated; ``greentrain.job.options``)."""
        self.clock = clock or SystemClock()
        self.parts = JobParts(clock=self.clock, devices=devices, actuators=actuators, monitor=monitor, model=model,
                              rate_probe=rate_probe)
        """The objects it is built from (``greentrain.job.build``)."""
        self.scaler: ReplicaScaler | None = None
        """Carbon scaling: an elastic job's replica actuator, set before entering (see the class docstring)."""
        self._dist = dist
        self._checkpoint = JobCheckpoint(save=save, load=load, model=model, optimizer=optimizer,
                                         checkpoint_dir=self.options.checkpoint_dir, state=state)
        self.relaunch: str = self.options.relaunch
        """'exec', 'exit' or 'none' ('auto' is resolved at ``__enter__`` from the number of processes)."""
        self._pause_mode = self.options.pause_mode
        state_path = self.options.state_path
        self._state_path = Path(state_path) if state_path else default_state_path(self.options.checkpoint_dir)
        self.start_step = 0
        """The step to start the loop at (restored from the checkpoint)."""
        self.should_stop = False
        """True after a checkpoint-mode pause (or a spent budget): leave the training loop."""
        self.budget_spent = False
        """True once a budget (``max_emissions_g``/``max_energy_j``) stopped the job (exit ``BUDGET_EXIT_CODE``)."""
        self.resume_at: datetime | None = None
        """When a checkpoint-mode pause plans to resume."""
        self.last_decision: Decision | None = None
        self.engine: Engine | None = None
        self.job_stats = JobStats(job=self.options.job, steps_total=0)
        self.metrics: MetricsServer | None = None
        """The running ``MetricsServer`` when ``metrics_port`` was given (its bound port in ``.port``)."""
        self._closers: list[Callable[[], object]] = []
        self._temp_state = False
        self._resumable = False
        self._keeper = StateKeeper(None, self.job, self.options.deadline)
        self._interrupted = False
        self._saved: EngineState | None = None
        self._job: Job | None = None
        self.hardware = JobHardware()
        """Actuators, operating-point profiler and precision controller of this job (built at ``__enter__``)."""

    @property
    def actuation(self) -> str:
        """'apply' or 'advise' (advisory mode: decisions are reported, never applied)."""
        return str(self.options.actuation)

    @property
    def job(self) -> str:
        """The job's label."""
        return self.options.job

    # ---- context manager ---------------------------------------------------------------------------

    def __enter__(self) -> Session:
        try:
            self._open()
        except KeyboardInterrupt:
            self._stop_interrupted()
        except BaseException:
            self._close_all(raise_errors=False)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self._stop_interrupted()
        if exc_type is not None or not self.should_stop or self.relaunch == "none" or self.budget_spent:
            self._close_all(raise_errors=exc_type is None)  # never mask the training loop's own exception
            if self.budget_spent and exc_type is None and self.relaunch != "none":
                sys.exit(BUDGET_EXIT_CODE)  # saved; nothing to relaunch: the budget is spent
            return
        engine = self._require_engine()
        interrupted = False
        try:
            if self.relaunch == "exec":
                interrupted = engine.wait_until(self.resume_at, "checkpoint pause")
                self.resume_at = None
        except KeyboardInterrupt:
            self._stop_interrupted()
        finally:
            self._close_all(raise_errors=False)
        if interrupted:
            return
        if self.relaunch == "exit":
            # Under the Slurm batch template ($GREENTRAIN_RESUME_FILE set), say when to requeue for;
            # elsewhere this is a no-op and the scheduler decides.
            from greentrain.integrations.slurm import write_resume_time

            write_resume_time(self.resume_at)
            sys.exit(RESUME_EXIT_CODE)
        if self._state_path is not None:
            os.environ[STATE_ENV] = str(self._state_path.resolve())
        reexec()

    # ---- the step boundary --------------------------------------------------------------------------

    @property
    def step_index(self) -> int:
        """Global index of the next step (start_step + steps done in this process)."""
        return self.engine.progress.steps_done if self.engine is not None else self.start_step

    @property
    def pause_mode(self) -> str:
        """'checkpoint' or 'suspend', resolved at ``__enter__``."""
        return self._pause_mode or "suspend"

    def step(self, tokens: int = 0, loss: Tensor | float | None = None) -> Decision:
        """End of one training step: measure, decide, and pause if the policy says so."""
        engine = self._require_engine()
        if self.should_stop:
            return self.last_decision or engine.decision
        decision = engine.step_end(tokens=tokens, loss=loss)
        self.hardware.step_end(engine, loss)
        self.last_decision = decision
        if decision.action == Action.STOP:  # a budget is spent: save and leave the loop for good
            self.budget_spent = True
            if self._checkpoint.available:
                self._checkpoint_pause(decision)
            self.should_stop = True
            return decision
        if decision.action != Action.RUN and not engine.finished:
            mode = self.pause_mode
            if mode == "auto":
                mode = auto_mode(engine, decision, can_release=self._checkpoint.available and self.relaunch == "exit")
            if mode == "suspend":
                engine.wait_until(decision.until, decision.reason or "paused")
            else:
                self._checkpoint_pause(decision)
                return decision
        engine.step_begin()
        self.hardware.step_begin(engine)
        return decision

    def saved(self, next_step: int) -> None:
        """Your own code just saved a complete checkpoint to resume at ``next_step`` (outside a pause, e.g.
        every N steps): the job's state moves with it, so an interrupt after it loses nothing before it."""
        engine = self._require_engine()
        if next_step != engine.progress.steps_done:
            raise ConfigError(f"Session.saved: next_step {next_step} is not the step the session is at "
                              f"({engine.progress.steps_done}); call it right after saving, with the next step")
        with deferred_interrupt():
            self._keeper.commit(engine, resume_at=None)

    # ---- precision ---------------------------------------------------------------------------------

    @property
    def precision(self) -> str | None:
        """The precision in use ('fp32', 'bf16', ...), or None without ``precision=``."""
        controller = self.hardware.precision
        return controller.current if controller is not None else None

    @contextmanager
    def autocast(self) -> Iterator[None]:
        """Context for your forward pass at the current precision (a no-op without ``precision=``)."""
        controller = self.hardware.precision
        with controller.autocast() if controller is not None else nullcontext():
            yield

    def backward(self, loss: Tensor, optimizer: Optimizer) -> None:
        """``loss.backward()``, ``optimizer.step()``, ``zero_grad``, through the grad scaler fp16 needs."""
        controller = self.hardware.precision
        if controller is not None:
            controller.backward_step(loss, optimizer)
            return
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    @property
    def finished(self) -> bool:
        """All ``steps_total`` steps done."""
        return self.engine is not None and self.engine.finished

    @property
    def deadline_missed(self) -> bool:
        """After the ``with`` block: the job finished after its deadline (already said on stderr)."""
        return self.engine is not None and self.engine.deadline_missed

    @property
    def deadline_exit_code(self) -> int:
        """The CLI's status for this end: 3 after a late finish unless best-effort, else 0."""
        engine = self.engine
        if engine is None or not engine.deadline_missed or engine.deadline.policy == "best-effort":
            return 0
        return DEADLINE_MISSED_EXIT_CODE

    # ---- internals ---------------------------------------------------------------------------------

    def _require_engine(self) -> Engine:
        if self.engine is None:
            raise ConfigError("Session.step: use the session inside 'with Session(...) as session:'")
        return self.engine

    def _open(self) -> None:
        rng_at_enter = RNGState.capture()  # before any of our set-up can draw a number
        policy = load_policy(self.options.policy)  # the one load: the engine takes this Policy
        self._pause_mode = resolve_pause_mode(self._pause_mode, policy.settings, self._checkpoint.available)
        broadcast = make_broadcast(self._dist)
        if self.relaunch == "auto":  # one process re-execs itself; several exit for their launcher to restart
            self.relaunch = "exec" if broadcast.world_size == 1 else "exit"
        if self._state_path is None and self.relaunch == "exec":
            self._state_path, self._temp_state = fresh_exec_state_path(self.job), True
        self._keeper.path = self._state_path
        prior = self._keeper.load()
        if prior is not None and prior.clock_at:  # a simulated calendar continues where the job stopped
            self.clock.catch_up(datetime.fromisoformat(prior.clock_at))
        self._checkpoint.setup(broadcast)
        self.start_step, rng = self._checkpoint.load_with_rng(rng_at_enter)
        prior, stale = self._keeper.resume_at_step(self.start_step)
        if stale and broadcast.is_leader:
            say(stale)
        self._job = build_job(self.options, self.parts, policy=policy, job_stats=self.job_stats,
                              broadcast=broadcast, prior=prior, steps_done=self.start_step,
                              hardware_released=self._pause_mode == "checkpoint" and self.relaunch == "exit",
                              scaler=self.scaler)
        self._closers.insert(0, self._finish_engine)  # persists, then closes the job (knobs restored last)
        self.engine, self.hardware, self.metrics = self._job.engine, self._job.hardware, self._job.metrics
        self._resumable = prior is not None  # until the start succeeds, only a prior run's state is worth keeping
        self._begin()
        self._resumable = True
        self.hardware.start(self.engine)
        rng.restore()  # last: our imports and set-up above (httpx imports rich, which draws) leave no trace

    def _begin(self) -> None:
        engine = self._require_engine()
        assert self._job is not None
        decision = self._job.begin(self.pause_mode)  # the deadline's one check, then the plan line
        self.last_decision = decision
        if decision.action != Action.RUN:
            engine.wait_until(decision.until, decision.reason or "delayed start")
        engine.step_begin()

    def _checkpoint_pause(self, decision: Decision) -> None:
        engine = self._require_engine()
        with deferred_interrupt():  # checkpoint first, then the state: Ctrl-C waits for both
            self._checkpoint.save(engine.progress.steps_done)
            self.should_stop = True
            self.resume_at = engine.resume_of(decision) or decision.until  # the resume the terminal gave
            self._keeper.commit(engine, resume_at=self.resume_at)

    def _finish_engine(self) -> None:
        job, self._job = self._job, None
        if job is None:
            return
        engine = job.engine
        state = self._keeper.capture(engine, resume_at=self.resume_at, finished=engine.finished)
        self._saved = state
        extra: dict[str, Any] = {"lost_steps": state.lost_steps, "lost_energy_j": state.lost_energy_j} \
            if state.lost_steps else {}
        if self._interrupted:
            job.begun = False  # one line for Ctrl-C (``_stop_interrupted``), not the summary
            extra["interrupted"] = True
        try:
            job.close(resume_at=self.resume_at, **extra)
        finally:  # after the close: the clock's last reading is stamped, so a relaunch never goes back
            if self._temp_state and engine.finished and self._state_path is not None:
                self._state_path.unlink(missing_ok=True)  # our own scratch file: nothing left to resume
            elif self._resumable:  # a start that failed (e.g. an impossible deadline) leaves nothing to resume
                self._keeper.write(state, engine)

    def _stop_interrupted(self) -> None:
        """Ctrl-C: keep what the last checkpoint holds, say one line, exit 130 (no traceback)."""
        at_step = self.step_index
        self._interrupted = True
        self._close_all(raise_errors=False)
        engine, state = self.engine, self._saved
        if engine is None or engine.is_leader:
            resume = state.steps_done if state is not None else self.start_step
            lost_j = self._keeper.lost_since_commit(state)[1] if state is not None else None
            say(interrupt_line(at_step, resume, lost_j if engine is not None and engine.measures_energy else None))
        raise Interrupted(INTERRUPTED_EXIT_CODE)

    def _close_all(self, raise_errors: bool = True) -> None:
        closers, self._closers = self._closers, []
        close_all(closers, raise_errors=raise_errors)
