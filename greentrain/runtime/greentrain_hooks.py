"""Wire the trainer's step boundary to greentrain: the Session (policy engine) and the exporter.

``run_training(cfg)`` is what ``greentrain train`` calls on every rank:

- with a policy, a :class:`greentrain.session.Session` owns the step
  boundary: rank 0 decides, every rank gets the same decision. A
  checkpoint-mode pause saves a DCP checkpoint through the trainer (all ranks)
  and stops the loop; a relaunch resumes from it with no lost step (one process
  re-execs itself after the wait; a multi-rank job exits with
  ``RESUME_EXIT_CODE`` so ``torchrun --max-restarts``/the scheduler restarts
  it). A precision decision is applied to the FSDP policy/autocast on all
  ranks before the next step.
- without a policy, ``--metrics-port`` still serves step/token counters
  (rank 0) from a :class:`~greentrain.jobstats.JobStats`.
- with ``[greentrain] scaling_profile`` (carbon scaling) the policy also picks
  the replica count; a change stops every rank after a checkpoint and sets
  ``trainer.rescale_to`` for the launcher (``runtime/elastic_hooks.py``).

A MoE model's router statistics (tokens per expert, imbalance) go to the
same ``JobStats`` either way, so the exporter serves them.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from greentrain.job.options import SessionSettings, settings_for
from greentrain.job.state import STATE_FILE_NAME
from greentrain.jobstats import JobState, JobStats
from greentrain.runtime.config import JobConfig
from greentrain.runtime.elastic_hooks import attach_scaler, elastic_config, finish_rescale, observer, single_node
from greentrain.runtime.metrics import StepMetrics
from greentrain.runtime.trainer import Trainer

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Literal

    from torch.distributed import ProcessGroup
    from torch.nn import Module
    from torch.optim import Optimizer

    from greentrain.clock import Clock
    from greentrain.device.discovery import DeviceSet
    from greentrain.engine.broadcast import Broadcast
    from greentrain.engine.collaborators import Actuators, EnergyMonitor, Loss
    from greentrain.job.options import PolicySpec
    from greentrain.policies.base import Decision
    from greentrain.runtime.elastic import RuntimeScaler
    from greentrain.session import Session

__all__ = ["SessionHook", "SessionArgs", "run_training", "report_router"]


class SessionArgs(SessionSettings, total=False):
    """``run_training(session_kwargs=...)``: ``Session`` keywords that replace the ``[greentrain]`` settings
    and the runtime's parts (e.g. a test's ``clock``, or ``policy`` as an object)."""

    policy: PolicySpec | None
    model: Module | None
    optimizer: Optimizer | None
    state: Mapping[str, object] | None
    dist: ProcessGroup | Broadcast | None
    clock: Clock | None
    devices: DeviceSet | Literal[False] | None
    actuators: Actuators | None
    monitor: EnergyMonitor | None
    rate_probe: Callable[[], float | None] | None


class SessionHook:
    """Adapts a Session to the trainer's ``on_step_end`` hook."""

    def __init__(self, session: Session, scaler: RuntimeScaler | None = None) -> None:
        self.session = session
        self.scaler = scaler

    @property
    def should_stop(self) -> bool:
        """A pause, a spent budget, or (carbon scaling) a new replica count: checkpoint and stop."""
        return bool(self.session.should_stop) or (self.scaler is not None and self.scaler.pending is not None)

    def on_step_end(self, step: int, tokens: int, loss: Loss) -> Decision:
        return self.session.step(tokens=tokens, loss=loss)


def _session(cfg: JobConfig, trainer: Trainer, extra: SessionArgs) -> Session:
    """The Session of one rank: the ``[greentrain]`` settings as they are, the trainer's checkpoint and metrics."""
    from greentrain.session import Session

    def save(next_step: int) -> None:
        if next_step != trainer.step:
            raise RuntimeError(f"session asked to save step {next_step}, trainer is at {trainer.step}")
        trainer.save_checkpoint()

    def load() -> int | None:
        return trainer.resume() if trainer.checkpointer is not None else None

    has_checkpoint = trainer.checkpointer is not None
    taken = {s.name for s in settings_for("session")} | {"policy"}  # scaling_profile: the runtime's (its scaler)
    # The section's fields are JobOptions fields with their types, which mypy cannot see (a built class).
    settings = cast("SessionArgs", {f.name: getattr(cfg.greentrain, f.name) for f in dataclasses.fields(cfg.greentrain)
                                    if f.name in taken})
    settings.update({
        "steps_total": cfg.train.steps, "pause_mode": settings["pause_mode"] if has_checkpoint else "suspend",
        "metrics_port": cfg.metrics.port if trainer.rank == 0 else None, "metrics_addr": cfg.metrics.addr,
        "metrics_allow_public": cfg.metrics.allow_public, "progress": False,
        "state_path": Path(cfg.checkpoint.dir) / STATE_FILE_NAME if has_checkpoint and cfg.checkpoint.dir else None})
    settings.update(extra)  # its policy, if any, replaces the section's
    return Session(save=save if has_checkpoint else None, load=load if has_checkpoint else None, **settings)


@contextlib.contextmanager
def _plain_metrics(cfg: JobConfig, trainer: Trainer):
    """JobStats (+ exporter when a port is given) for a run without a policy; yields an on_step callback."""
    stats = JobStats(job=cfg.greentrain.job, state=JobState.RUNNING)
    server = None
    if cfg.metrics.port is not None and trainer.rank == 0:
        try:
            from greentrain.exporters import MetricsServer
        except ImportError as e:
            from greentrain.errors import ConfigError

            raise ConfigError(f"--metrics-port: the exporter is not available ({e})") from None
        server = MetricsServer(job=cfg.greentrain.job, job_stats=stats, addr=cfg.metrics.addr, port=cfg.metrics.port,
                               allow_public=cfg.metrics.allow_public)
        server.start()
        if not cfg.greentrain.quiet:
            from greentrain.job.announce import say

            say(f"greentrain: serving metrics at {server.url}")  # with a policy, the plan line says it

    router = report_router(stats)

    def on_step(m: StepMetrics) -> None:
        stats.add(steps=1, tokens=m.tokens)
        stats.update(precision=m.precision)
        router(m)

    try:
        yield on_step
    finally:
        stats.update(state=JobState.WAITING)
        if server is not None:
            server.stop()


def report_router(stats: JobStats) -> Callable[[StepMetrics], None]:
    """An on_step callback that adds a MoE step's router statistics to ``stats`` (the exporter's)."""

    def on_step(m: StepMetrics) -> None:
        if m.expert_tokens is not None:
            stats.add_expert_tokens(m.expert_tokens, m.expert_imbalance)

    return on_step


def run_training(cfg: JobConfig, *, on_step: Callable[[StepMetrics], None] | None = None,
                 on_ready: Callable[[Trainer], None] | None = None, session_kwargs: SessionArgs | None = None,
                 handle_signals: bool = False) -> tuple[Trainer, list[StepMetrics]]:
    """Build the trainer for this rank and train, under the greentrain session when a policy is set.

    ``on_ready(trainer)`` runs once the trainer is built (e.g. to report the planned mesh).
    ``session_kwargs`` go to ``Session`` as they are (e.g. ``clock``, ``policy`` as an object).
    ``handle_signals``: on SIGTERM/SIGINT checkpoint at the next step boundary and return (without a
    policy; under a policy the Session owns the signals).
    """
    trainer = Trainer(elastic_config(cfg, _world_size()))
    if on_ready is not None:
        on_ready(trainer)
    callbacks = [on_step] if on_step is not None else []
    extra = session_kwargs.copy() if session_kwargs else SessionArgs()
    if cfg.greentrain.policy is None and "policy" not in extra:
        with _plain_metrics(trainer.cfg, trainer) as count:
            trainer.on_step = _chain([count] + callbacks)  # counters first: callbacks see this step counted
            return trainer, trainer.fit(handle_signals=handle_signals)
    world_size = trainer.dims.world_size
    if trainer.cfg.greentrain.scaling_profile and trainer.cfg.greentrain.relaunch == "auto":
        extra.setdefault("relaunch", "exit")  # the elastic launcher relaunches, at whatever size comes next
    session = _session(trainer.cfg, trainer, extra)
    scaler = attach_scaler(trainer.cfg, world_size, session)
    if scaler is not None and trainer.rank == 0:
        callbacks.append(observer(scaler, session, single_node(world_size), str(trainer.cfg.checkpoint.dir)))
    trainer.on_step = _chain([report_router(session.job_stats)] + callbacks)
    history: list[StepMetrics] = []
    with session:
        trainer.hook = SessionHook(session, scaler)
        trainer.step = max(trainer.step, session.start_step)
        first = session.last_decision.precision if session.last_decision is not None else None  # before step 0
        if first and first != trainer.precision:
            trainer.set_precision(first)
        if scaler is None or scaler.pending is None:  # a new count asked before step 0: relaunch first
            history = trainer.fit(resume=False)
    trainer.rescale_to = finish_rescale(trainer.cfg, trainer, scaler, trainer.rank)
    trainer.deadline_exit_code = session.deadline_exit_code  # 3 after a late finish (strict), else 0
    return trainer, history


def _world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _chain(callbacks):
    def call(m: StepMetrics) -> None:
        for cb in callbacks:
            cb(m)

    return call if callbacks else None
