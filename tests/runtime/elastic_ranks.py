"""Ranks of an elastic run for tests/runtime/test_elastic.py (module-level: pickled by reference)."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from greentrain.policies.base import Decision, Policy, Snapshot

MICRO = 2
"""Sequences per rank per micro-step: global batch 8 = replicas × grad_accum × 2 at every size."""


class ReplicaScript(Policy):
    """Asks for the scripted replica count after the scripted steps; runs otherwise (the grid is flat)."""

    name = "replica-script"

    def __init__(self, schedule: dict[int, int]) -> None:
        self.schedule = schedule

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        wanted = self.schedule.get(snapshot.steps_done)
        if wanted is not None and wanted != snapshot.replicas:
            return Decision(replicas=wanted, reason=f"test: {wanted} replicas after step {snapshot.steps_done}")
        return Decision(reason="test: run")


def _faults(rank: int, world: int, faults: dict[str, Any]) -> None:
    """SIGKILL this rank once (a marker file remembers) mid-save or mid-load, as a preemption would."""
    from greentrain.runtime.checkpoint import Checkpointer

    def once(key: str) -> bool:
        spec = faults.get(key)
        if spec is None or (spec["world"], spec["rank"]) != (world, rank):
            return False
        marker = Path(spec["marker"])
        if marker.exists():
            return False
        marker.write_text("fired")
        return True

    save, load = Checkpointer.save, Checkpointer._load

    def killing_save(self, step, train_state):
        if step == faults.get("kill_save", {}).get("step") and once("kill_save"):
            os.kill(os.getpid(), signal.SIGKILL)
        return save(self, step, train_state)

    def killing_load(self, step):
        if step >= faults.get("kill_load", {}).get("after", 0) and once("kill_load"):
            os.kill(os.getpid(), signal.SIGKILL)
        return load(self, step)

    Checkpointer.save, Checkpointer._load = killing_save, killing_load


def elastic_rank(rank: int, world: int, base: dict, schedule: dict[int, int], faults: dict[str, Any]) -> dict:
    """One rank of one launch at ``world`` replicas: train under the script; what it trained and asked for."""
    from greentrain.clock import ReplayClock
    from greentrain.runtime.config import config_from_dict
    from greentrain.runtime.elastic import config_at
    from greentrain.runtime.greentrain_hooks import run_training
    from tests.runtime.test_session_hooks import _FlatGrid

    _faults(rank, world, faults)
    cfg = config_at(config_from_dict(base, origin="test"), world, MICRO)
    clock = ReplayClock(datetime(2022, 6, 1, tzinfo=UTC), speedup=1.0)
    kwargs = dict(policy=ReplicaScript(schedule), clock=clock, provider=_FlatGrid(clock), decide_interval_s=1e-6,
                  devices=False, pause_mode="checkpoint")
    trainer, history = run_training(cfg, session_kwargs=kwargs)
    return {"history": [(m.step, m.loss, m.grad_norm) for m in history], "rescale_to": trainer.rescale_to,
            "grad_accum": trainer.cfg.train.grad_accum}
