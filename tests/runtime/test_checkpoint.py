"""DCP checkpoints: save under one mesh, load under another, continue = uninterrupted; pause/resume loses no step."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.runtime.checkpoint import latest_step
from greentrain.runtime.trainer import Trainer

from .harness import run_ranks, tiny_config
from .layouts import compare

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOTAL = 4
HALF = 2


def _cfg(folder: str | None, parallel: dict | None = None, async_save: bool = False):
    ckpt = {"dir": folder, "interval": HALF, "async_save": async_save} if folder else {}
    return tiny_config(parallel=parallel or {"dp_shard": 1}, train={"steps": TOTAL}, checkpoint=ckpt)


def _history(cfg, steps: int | None = None) -> list[tuple[float, float]]:
    return [(m.loss, m.grad_norm) for m in Trainer(cfg).fit(steps)]


def _first_half(rank: int, world: int, folder: str, parallel: dict, async_save: bool):
    return _history(_cfg(folder, parallel, async_save), HALF)


def _second_half(rank: int, world: int, folder: str, parallel: dict):
    return _history(_cfg(folder, parallel))


@pytest.fixture(scope="module")
def uninterrupted():
    return _history(_cfg(None))


@pytest.mark.timeout(200)
def test_fsdp_checkpoint_resumes_under_pp_x_tp(tmp_path: Path, uninterrupted) -> None:
    folder = str(tmp_path / "ckpt")
    first = run_ranks(_first_half, 2, folder, {"dp_shard": 2}, False, timeout_s=90)[0]
    assert latest_step(folder) == HALF
    pp_tp = {"pp": 2, "tp": 2, "dp_shard": 1, "pp_schedule": "1f1b", "microbatches": 2}
    second = run_ranks(_second_half, 4, folder, pp_tp, timeout_s=100)[0]
    assert len(second) == TOTAL - HALF, "resume must continue at the saved step, not restart"
    compare(uninterrupted, first + second, "fsdp(2) -> pp(2) x tp(2)")


@pytest.mark.timeout(200)
def test_async_save_on_hsdp_loads_in_one_process(tmp_path: Path, uninterrupted) -> None:
    folder = str(tmp_path / "ckpt")
    first = run_ranks(_first_half, 4, folder, {"dp_replicate": 2, "dp_shard": 2}, True, timeout_s=100)[0]
    assert latest_step(folder) == HALF, "async save must be complete on disk when fit() returns"
    second = _history(_cfg(folder))
    compare(uninterrupted, first + second, "hsdp(2x2) async -> single process")


_MOE = {"n_experts": 4, "top_k": 2, "shared_expert": True}


def _moe_cfg(folder: str | None, parallel: dict):
    ckpt = {"dir": folder, "interval": HALF} if folder else {}
    return tiny_config(model=_MOE, parallel=parallel, train={"steps": TOTAL}, checkpoint=ckpt)


def _moe_first_half(rank: int, world: int, folder: str, parallel: dict):
    return _history(_moe_cfg(folder, parallel), HALF)


def _moe_second_half(rank: int, world: int, folder: str, parallel: dict):
    return _history(_moe_cfg(folder, parallel))


@pytest.mark.timeout(300)
def test_moe_checkpoint_reshards_across_expert_parallel(tmp_path: Path) -> None:
    """Saved with the experts split over ep=2, it resumes with all experts in one process (ep=1) and with
    one expert per rank (ep=4), and both continue exactly as the uninterrupted run."""
    import shutil

    uninterrupted = _history(_moe_cfg(None, {"dp_shard": 1}))
    folder = str(tmp_path / "ckpt")
    first = run_ranks(_moe_first_half, 2, folder, {"ep": 2, "dp_shard": 1}, timeout_s=150)[0]
    assert latest_step(folder) == HALF
    copy = str(tmp_path / "ckpt-copy")
    shutil.copytree(folder, copy)  # each resume writes its own later checkpoints
    on_one = _history(_moe_cfg(folder, {"dp_shard": 1}))
    on_four = run_ranks(_moe_second_half, 4, copy, {"ep": 4, "dp_shard": 1}, timeout_s=150)[0]
    assert len(on_one) == len(on_four) == TOTAL - HALF, "resume must continue at the saved step"
    compare(uninterrupted, first + on_one, "moe ep=2 -> ep=1 (one process)")
    compare(uninterrupted, first + on_four, "moe ep=2 -> ep=4")


class _PauseAt:
    """A step hook that asks for a checkpoint-mode pause at one step (what a Session does)."""

    def __init__(self, trainer: Trainer, at_step: int) -> None:
        self.trainer, self.at_step, self.should_stop = trainer, at_step, False
        self.seen: list[int] = []

    def on_step_end(self, step: int, tokens: int, loss: float):
        self.seen.append(step)
        if step == self.at_step:
            self.trainer.save_checkpoint()
            self.should_stop = True
        return None


@pytest.mark.timeout(120)
def test_pause_then_resume_loses_no_step(tmp_path: Path, uninterrupted) -> None:
    cfg = _cfg(str(tmp_path / "ckpt")).replace("checkpoint", interval=100)
    first = Trainer(cfg)
    first.hook = hook = _PauseAt(first, at_step=3)
    before = first.fit()
    assert hook.seen == [1, 2, 3] and first.step == 3
    assert latest_step(tmp_path / "ckpt") == 3, "the pause checkpoint is the step the loop stopped after"
    after = Trainer(cfg).fit()
    assert [m.step for m in before + after] == list(range(1, TOTAL + 1)), "every step exactly once"
    compare(uninterrupted, [(m.loss, m.grad_norm) for m in before + after], "pause/resume")


@pytest.mark.timeout(60)
def test_checkpoints_are_pruned_and_incomplete_ones_ignored(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    cfg = _cfg(str(folder)).replace("checkpoint", interval=1, keep=2)
    Trainer(cfg).fit()
    assert sorted(p.name for p in folder.iterdir()) == ["step-3", "step-4"]
    (folder / "step-9").mkdir()  # a save killed before its .metadata was written
    assert latest_step(folder) == 4


@pytest.mark.timeout(60)
def test_sigterm_checkpoints_at_the_step_boundary(tmp_path: Path, uninterrupted) -> None:
    import os
    import signal

    cfg = _cfg(str(tmp_path / "ckpt")).replace("checkpoint", interval=100)
    trainer = Trainer(cfg)
    trainer.on_step = lambda m: os.kill(os.getpid(), signal.SIGTERM) if m.step == 1 else None
    handler = signal.getsignal(signal.SIGTERM)
    before = trainer.fit(handle_signals=True)
    assert [m.step for m in before] == [1] and latest_step(tmp_path / "ckpt") == 1
    assert signal.getsignal(signal.SIGTERM) == handler, "the previous handler is restored"
    after = Trainer(cfg).fit()
    compare(uninterrupted, [(m.loss, m.grad_norm) for m in before + after], "SIGTERM/resume")


@pytest.mark.timeout(60)
def test_resume_restores_every_rng_stream(tmp_path: Path) -> None:
    import random

    import numpy as np
    import torch

    cfg = _cfg(str(tmp_path / "ckpt")).replace("checkpoint", interval=100)
    first = Trainer(cfg)
    first.hook = _PauseAt(first, at_step=2)
    first.fit()
    expected = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(1), np.random.seed(1), torch.manual_seed(1)  # a new process starts elsewhere
    assert Trainer(cfg).resume() == 2
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected


def test_non_tensor_items_tagged_cpu_0_still_load(tmp_path: Path) -> None:
    """A non-tensor item pickled with the location tag "cpu:0" (what a torch 2.11 GPU host left after an
    async HSDP save) fails DCP's default load; the Checkpointer's load planner maps it to the CPU."""
    import types
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp
    import torch.serialization as ser
    from torch.distributed.checkpoint.api import CheckpointException

    from greentrain.runtime.checkpoint import HostLoadPlanner

    def tag_cpu_0(obj):
        return "cpu:0" if obj.device.type == "cpu" else None

    entry = (0, tag_cpu_0, lambda obj, location: None)
    ser._package_registry.insert(0, entry)  # first tagger wins: every CPU storage is written as "cpu:0"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dcp.save({"w": torch.arange(4.0), "extra": types.SimpleNamespace(t=torch.ones(2))},
                     checkpoint_id=str(tmp_path))
    finally:
        ser._package_registry.remove(entry)

    def target():
        return {"w": torch.zeros(4), "extra": types.SimpleNamespace(t=torch.zeros(2))}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CheckpointException, match="tagged with cpu:0"):  # DCP wraps the rank's error
            dcp.load(target(), checkpoint_id=str(tmp_path))
        state = target()
        dcp.load(state, checkpoint_id=str(tmp_path), planner=HostLoadPlanner())
    assert torch.equal(state["w"], torch.arange(4.0))
    assert torch.equal(state["extra"].t, torch.ones(2))
