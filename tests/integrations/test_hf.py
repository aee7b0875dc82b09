"""A real Hugging Face Trainer (tiny GPT-2 built locally) pauses on a replayed dirty spell, saves,
resumes from its checkpoint, and ends bit-identical to an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402  (a dev dependency: missing is an error)
import transformers  # noqa: E402  (a dev dependency: missing is an error)

from gt_dirty_spell import T0, dirty_spell_trace  # noqa: E402

from greentrain.clock import ReplayClock  # noqa: E402
from greentrain.integrations.hf import STATE_FILE, GreenTrainCallback, train  # noqa: E402

STEPS = 24


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 64, (STEPS * 4, 16), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def make_trainer(out: Path, callbacks: list) -> transformers.Trainer:
    transformers.set_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     bos_token_id=0, eos_token_id=0)
    args = transformers.TrainingArguments(
        output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=4, learning_rate=1e-2,
        report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True, seed=0,
        dataloader_num_workers=0, disable_tqdm=True)
    return transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args,
                                train_dataset=TokenDataset(), callbacks=callbacks)


def threshold_policy(tmp_path: Path, mode: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(f'[policy]\nkind = "threshold"\nthreshold_g_per_kwh = 200\n\n'
                    f'[settings]\npause_mode = "{mode}"\nresume_overhead_s = 0\n')
    return path


def weights(trainer) -> dict:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    trainer = make_trainer(tmp_path_factory.mktemp("ref"), [])
    trainer.train()
    return weights(trainer)


def green(tmp_path: Path, mode: str, speedup: float = 900.0) -> GreenTrainCallback:
    # Clean now, dirty from 01:00 to 03:00, clean after; at 900x one trace hour passes in 4 real seconds,
    # so the spell outlasts the warm-up and the three steps a plan waits for, even on a loaded machine.
    clock = ReplayClock(T0 + timedelta(minutes=59, seconds=50), speedup=speedup)
    return GreenTrainCallback(policy=str(threshold_policy(tmp_path, mode)), zone="GB", clock=clock,
                              provider=f"csv:{dirty_spell_trace(tmp_path)}",
                              deadline=T0 + timedelta(hours=24), pause_mode=mode, devices=False,
                              progress=False, decide_interval_s=1.0, jsonl=tmp_path / "run.jsonl")


@pytest.mark.timeout(120)
def test_pause_saves_a_checkpoint_and_resuming_matches_an_uninterrupted_run(tmp_path: Path, reference) -> None:
    callback = green(tmp_path, "checkpoint")
    trainer = make_trainer(tmp_path / "out", [callback])
    trainer.train()
    assert callback.paused, "the dirty spell should have paused the job"
    paused_at = trainer.state.global_step
    assert 0 < paused_at < STEPS
    checkpoint = tmp_path / "out" / f"checkpoint-{paused_at}"
    assert (checkpoint / STATE_FILE).exists() and (checkpoint / "trainer_state.json").exists()
    assert callback.resume_at is not None and callback.resume_at > T0 + timedelta(hours=1)

    assert callback.wait_for_resume()
    trainer.train(resume_from_checkpoint=True)
    callback.close()
    assert trainer.state.global_step == STEPS and not callback.paused
    assert trainer.state.global_step - paused_at > 0  # the rest ran after the resume
    final = weights(trainer)
    assert final.keys() == reference.keys()
    for name, tensor in reference.items():
        assert torch.equal(final[name], tensor), name


@pytest.mark.timeout(120)
def test_train_helper_and_in_process_suspend_reach_the_same_state(tmp_path: Path, reference) -> None:
    for mode in ("checkpoint", "suspend"):
        (tmp_path / mode).mkdir()
        callback = green(tmp_path / mode, mode)
        trainer = make_trainer(tmp_path / mode / "out", [callback])
        train(trainer)
        assert trainer.state.global_step == STEPS
        final = weights(trainer)
        assert all(torch.equal(final[k], v) for k, v in reference.items()), mode
        events = [json.loads(line) for line in (tmp_path / mode / "run.jsonl").read_text().splitlines()]
        assert any(e["event"] == "action" and e["action"] == "pause" for e in events), f"{mode}: no pause"
        steps = [e for e in events if e["event"] == "step"]
        assert len(steps) == STEPS, f"{mode}: every step measured exactly once"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_runs_beside_transformers_codecarbon_callback(tmp_path: Path, reference, monkeypatch) -> None:
    import codecarbon  # a core dependency of greentrain
    from codecarbon.external.geography import CloudMetadata as Cloud, GeoMetadata

    # CodeCarbon looks up location and cloud over the network at start-up; answer locally instead.
    monkeypatch.setattr(codecarbon.EmissionsTracker, "_get_geo_metadata",
                        lambda self: GeoMetadata(country_iso_code="GBR", country_name="United Kingdom"))
    monkeypatch.setattr(codecarbon.EmissionsTracker, "_get_cloud_metadata",
                        lambda self: Cloud(provider=None, region=None))
    monkeypatch.setenv("CODECARBON_LOG_LEVEL", "error")
    trainer = make_trainer(tmp_path / "out", [])
    tracker = transformers.integrations.CodeCarbonCallback()  # what report_to=["codecarbon"] adds
    trainer.add_callback(tracker)
    tracker.on_init_end(trainer.args, trainer.state, trainer.control)
    # CodeCarbon's tracker.start() takes ~2 s at train begin: a slower replay keeps the dirty spell ahead.
    callback = green(tmp_path, "checkpoint", speedup=900.0)
    trainer.add_callback(callback)
    train(trainer)
    assert callback.pauses >= 1 and trainer.state.global_step == STEPS
    assert (tmp_path / "out" / "emissions.csv").exists()  # CodeCarbon measured its runs
    final = weights(trainer)
    assert all(torch.equal(final[k], v) for k, v in reference.items())


class _SendSignalAt(transformers.TrainerCallback):
    """Plays the scheduler: SIGUSR1 (Slurm --signal / the batch template) while step ``at`` runs."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        if state.global_step + 1 == self.at:
            os.kill(os.getpid(), signal.SIGUSR1)


@pytest.mark.timeout(120)
def test_stop_signal_checkpoints_at_the_next_step_and_a_new_run_resumes(tmp_path: Path, reference) -> None:
    previous = signal.getsignal(signal.SIGUSR1)
    callback = GreenTrainCallback(policy="run-now", devices=False, progress=False, stop_signals=(signal.SIGUSR1,))
    trainer = make_trainer(tmp_path / "out", [_SendSignalAt(7), callback])
    train(trainer)  # does not wait: a signal stop is the scheduler's to resume
    assert callback.paused and callback.stopped_by_signal and callback.resume_at is None
    assert trainer.state.global_step == 7 and (tmp_path / "out" / "checkpoint-7").is_dir()
    assert signal.getsignal(signal.SIGUSR1) is previous  # handler restored on close

    fresh = GreenTrainCallback(policy="run-now", devices=False, progress=False)
    trainer = make_trainer(tmp_path / "out", [fresh])
    train(trainer, resume_from_checkpoint=True)
    assert trainer.state.global_step == STEPS
    final = weights(trainer)
    assert all(torch.equal(final[k], v) for k, v in reference.items())


@pytest.mark.timeout(120)
def test_says_its_plan_and_fallback_and_counts_tokens(tmp_path: Path, monkeypatch, caplog) -> None:
    """No provider and no Electricity Maps token: the plan line says it fell back to the static averages; the
    run log's summary counts the tokens the model took although the Trainer keeps no count of its own."""
    import logging

    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    trainer = make_trainer(tmp_path / "out", [])
    callback = GreenTrainCallback(policy="run-now", zone="GB", devices=False, progress=False,
                                  jsonl=tmp_path / "run.jsonl")
    trainer.add_callback(callback)
    with caplog.at_level(logging.INFO, logger="greentrain.report"):
        train(trainer)
    said = [r.getMessage() for r in caplog.records if r.name == "greentrain.report"]
    assert len(said) == 2, said
    assert said[0].startswith("greentrain: plan: policy run-now, carbon GB from static annual averages")
    assert "a fallback: no live provider is configured" in said[0]
    assert said[1].startswith(f"greentrain: done: {STEPS}/{STEPS} steps, energy not measured"), said[1]
    events = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    summary = [e for e in events if e["event"] == "summary"][-1]
    assert summary["tokens"] == STEPS * 4 * 16
