"""Carbon scaling inside ``run_training``: the scaler for the session, and the stop for a relaunch.

``attach_scaler`` gives the session's engine a ``RuntimeScaler`` when the job
has ``[greentrain] scaling_profile`` and a policy. When the policy asks for
another count, every rank stops at that step boundary after the trainer's
checkpoint; ``finish_rescale`` then writes the request for the launcher
(rank 0) and the running profile estimate. A request made before step 0 (the
first decision after a launch) stops before any step.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from greentrain.errors import ConfigError
from greentrain.provenance import Source
from greentrain.runtime.config import JobConfig
from greentrain.integrations.slurm import write_replicas
from greentrain.runtime.elastic import ReplicaState, RuntimeScaler, load_profile_for, micro_batch, sized_config
from greentrain.runtime.metrics import StepMetrics

if TYPE_CHECKING:
    from greentrain.runtime.trainer import Trainer
    from greentrain.session import Session

__all__ = ["attach_scaler", "elastic_config", "finish_rescale", "observer", "single_node"]


def elastic_config(cfg: JobConfig, world_size: int) -> JobConfig:
    """The config this launch trains with: an elastic job's is sized for ``world_size`` (same global batch,
    the first launch's micro-batch, accumulation absorbing the rest), whoever launched it; others as given."""
    if not (cfg.greentrain.scaling_profile and cfg.checkpoint.dir):
        return cfg
    return sized_config(cfg, world_size)[0]


def attach_scaler(cfg: JobConfig, world_size: int, session: Session) -> RuntimeScaler | None:
    """A scaler for an elastic job (None for a fixed-size one), set as the session's ``scaler`` (before
    the session is entered, so its first decision already plans the count)."""
    if not cfg.greentrain.scaling_profile:
        return None
    if not cfg.checkpoint.dir:
        raise ConfigError("greentrain.scaling_profile: carbon scaling needs checkpoint.dir (--checkpoint-dir): "
                          "a change of replica count is a checkpoint and a relaunch")
    state = ReplicaState.load(cfg.checkpoint.dir)
    failed = set(state.failed) if state else set()
    launched = world_size // (cfg.parallel.tp * cfg.parallel.pp)
    if state is not None and state.replicas != launched and state.working == launched:
        # Launched back at the count that worked although another was asked for: whoever relaunched (Slurm's
        # template, a Kubernetes operator) fell back because that count failed. Never plan it again.
        failed.add(state.replicas)
        state.failed, state.replicas = sorted(failed), launched
        if int(os.environ.get("RANK", "0")) == 0:
            state.save(cfg.checkpoint.dir)
    scaler = RuntimeScaler(cfg, load_profile_for(cfg), world_size, micro=micro_batch(cfg, world_size),
                           failed=tuple(sorted(failed)))
    if scaler.replicas not in scaler.profile.replica_counts:
        raise ConfigError(f"greentrain.scaling_profile: {scaler.replicas} replicas (this launch) is not a count in "
                          f"{cfg.greentrain.scaling_profile}; valid: {', '.join(map(str, scaler.profile.replica_counts))}")
    session.scaler = scaler
    return scaler


def observer(scaler: RuntimeScaler, session: Session, single_node: bool, folder: str) -> Callable[[StepMetrics], None]:
    """Rank 0's ``on_step`` callback: after the first step at this count, record it as working (the launcher's
    fallback); then feed each step's measured throughput (and draw, when the session's monitor sees the whole
    job: one node) into the scaler's estimate."""
    recorded = False

    def observe(m: StepMetrics) -> None:
        nonlocal recorded
        if not recorded:
            recorded = True
            state = ReplicaState.load(folder) or ReplicaState(replicas=scaler.replicas)
            if (state.working, state.micro_batch) != (scaler.replicas, scaler.micro):
                state.working, state.micro_batch = scaler.replicas, scaler.micro
                state.save(folder)
        engine = session.engine
        power_w = engine.power_w() if engine is not None and single_node else None
        scaler.observe(m.tokens_per_s, power_w, Source.INTEGRATED)

    return observe


def finish_rescale(cfg: JobConfig, trainer: Trainer, scaler: RuntimeScaler | None, rank: int) -> int | None:
    """After the loop: the count to relaunch at (None when no change was asked); rank 0 writes the request
    (the trainer's checkpoint at this step is complete by now) and the running estimate."""
    if scaler is None:
        return None
    folder = cfg.checkpoint.dir
    if rank == 0 and folder:
        scaler.write_estimate(folder)
    if scaler.pending is None:
        return None
    if rank == 0 and folder:
        prior = ReplicaState.load(folder)
        state = ReplicaState(replicas=scaler.pending, working=scaler.replicas, step=trainer.step,
                             failed=list(scaler.failed), reason=scaler.reason,
                             changes=(prior.changes if prior else 0) + 1, micro_batch=scaler.micro)
        state.save(folder)
        write_replicas(scaler.pending)  # under the Slurm batch template: requeue at this count
    return scaler.pending


def single_node(world_size: int) -> bool:
    """Whether every rank runs on this node (then rank 0's monitor sees the whole job's devices)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", world_size)) == world_size
