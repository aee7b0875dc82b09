"""A real Lightning Trainer (CPU) pauses on a replayed dirty spell, checkpoints, resumes, and ends
identical to an uninterrupted run; the callback's own state survives the checkpoint."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

import torch  # noqa: E402  (a dev dependency: missing is an error)
import lightning.pytorch as L  # noqa: E402  (a dev dependency: missing is an error)

from gt_dirty_spell import T0, dirty_spell_trace  # noqa: E402
from gt_lightning import Regressor  # noqa: E402

from greentrain.clock import ReplayClock  # noqa: E402
from greentrain.integrations.lightning import PAUSE_CHECKPOINT, GreenTrainCallback, ResumableLoader, fit  # noqa: E402

STEPS = 24


def _batches() -> ResumableLoader:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS * 8, 8, generator=generator)
    y = x.sum(dim=1, keepdim=True).sin()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8, shuffle=False)
    return ResumableLoader(loader)


def make_trainer(root: Path, callbacks: list) -> L.Trainer:
    return L.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(root),
                     callbacks=callbacks)


def threshold_policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text('[policy]\nkind = "threshold"\nthreshold_g_per_kwh = 200\n\n'
                    '[settings]\npause_mode = "checkpoint"\nresume_overhead_s = 0\n')
    return path


def green(tmp_path: Path, clock_start: timedelta = timedelta(minutes=59, seconds=55)) -> GreenTrainCallback:
    clock = ReplayClock(T0 + clock_start, speedup=3600.0)  # a trace hour per real second
    return GreenTrainCallback(policy=str(threshold_policy(tmp_path)), zone="GB", clock=clock,
                              provider=f"csv:{dirty_spell_trace(tmp_path)}",
                              deadline=T0 + timedelta(hours=24), devices=False, progress=False,
                              decide_interval_s=1.0, jsonl=tmp_path / "run.jsonl")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    model = Regressor(_batches)
    make_trainer(tmp_path_factory.mktemp("ref"), []).fit(model)
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.timeout(120)
def test_pause_checkpoints_and_resume_matches_an_uninterrupted_run(tmp_path: Path, reference) -> None:
    callback = green(tmp_path)
    model = Regressor(_batches)
    trainer = make_trainer(tmp_path, [callback])
    trainer.fit(model)
    assert callback.paused and callback.pause_checkpoint == tmp_path / PAUSE_CHECKPOINT
    paused_at = trainer.global_step
    assert 0 < paused_at < STEPS

    saved = torch.load(callback.pause_checkpoint, weights_only=False)
    (state,) = [v for k, v in saved["callbacks"].items() if "GreenTrainCallback" in k]
    assert state["engine"]["deadline"] == (T0 + timedelta(hours=24)).isoformat()
    assert state["engine"]["steps_done"] == paused_at and state["pauses"] == 1

    # A fresh process: new callback (no deadline given: it must come from the checkpoint), new trainer.
    callback.close()
    resumed = green(tmp_path, clock_start=timedelta(hours=3))
    resumed.options.deadline = None
    model2 = Regressor(_batches)
    trainer2 = make_trainer(tmp_path, [resumed])
    trainer2.fit(model2, ckpt_path=callback.pause_checkpoint)
    resumed.close()
    assert trainer2.global_step == STEPS and not resumed.paused
    assert resumed.pauses == 1  # restored through load_state_dict
    for name, tensor in reference.items():
        assert torch.equal(model2.state_dict()[name], tensor), name


@pytest.mark.timeout(120)
def test_fit_helper_waits_and_resumes_in_process(tmp_path: Path, reference) -> None:
    callback = green(tmp_path)
    model = Regressor(_batches)
    fit(make_trainer(tmp_path, [callback]), model)
    assert not callback.paused and callback.pauses >= 1
    for name, tensor in reference.items():
        assert torch.equal(model.state_dict()[name], tensor), name
    events = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert len([e for e in events if e["event"] == "step"]) == STEPS
