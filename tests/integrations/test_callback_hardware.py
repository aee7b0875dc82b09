"""Jobs under the HF, Lightning and Accelerate callbacks get what a Session gets from ``build_job``: the
power limits of a (fake) GPU profiled during the first steps, the measured points handed to the
engine, a precision trial by measured energy per step, and every knob restored at the end."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402

from greentrain.clock import FrozenClock  # noqa: E402
from greentrain.device import DeviceSet  # noqa: E402
from greentrain.events import read_events  # noqa: E402
from greentrain.monitor import Monitor  # noqa: E402
from greentrain.testing import FakeGPU  # noqa: E402

pytestmark = pytest.mark.timeout(240)

T0 = datetime(2024, 3, 1, tzinfo=UTC)
BASE_STEP_S = 2.0  # a step at full power takes 2 s of job time
BF16_SPEEDUP = 0.6  # bf16 steps take 60% of the time here: the trial must find it cheaper per step
STEPS = 64  # the power sweep (about 36 steps on an A40), then 2 x 7 trial steps, then settled


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENTRAIN_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.setenv("GREENTRAIN_STATE_DIR", str(tmp_path / "default-state"))
    monkeypatch.delenv("GREENTRAIN_ADVISE_ONLY", raising=False)


class Job:
    """A fake A40 on a hand-driven clock: each step lasts as long as the GPU's limit (and precision) allow."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FrozenClock(T0)
        self.gpu = FakeGPU("a40", "imagenet/resnet50", time_fn=lambda: self.clock.now().timestamp(), ripple=0.0)
        self.default_w = self.gpu.power_limit_w()
        self.tmp_path = tmp_path
        self.dtypes: set[torch.dtype] = set()
        # On the job's clock, with the counters read at each step boundary: per-step energy of a
        # simulated step whose real duration is a few milliseconds.
        self.monitor = Monitor([self.gpu], time_fn=lambda: self.clock.now().timestamp(), fresh_step_reads=True)
        self.monitor.start()

    def options(self) -> dict:
        return dict(clock=self.clock, devices=DeviceSet([self.gpu], [], []), monitor=self.monitor,
                    progress=False, pause_mode="suspend",
                    precision=["fp32", "bf16"], jsonl=self.tmp_path / "run.jsonl",
                    profile_cache_dir=self.tmp_path / "cache", state_dir=self.tmp_path / "state")

    def advance(self, precision: str | None) -> None:
        scale = BF16_SPEEDUP if precision == "bf16" else 1.0
        self.clock.advance(self.gpu.step_time_s(BASE_STEP_S) * scale)

    def check(self) -> None:
        self.monitor.stop()
        events = read_events(self.tmp_path / "run.jsonl")
        points = [e for e in events if e["event"] == "operating_points"]
        assert points and points[0]["source"] == "measured" and len(points[0]["points"]) > 3
        switches = [e["precision"] for e in events if e["event"] == "precision"]
        assert switches and switches[-1] == "bf16", switches  # trialled, and the cheaper one kept
        assert {torch.float32, torch.bfloat16} <= self.dtypes  # the steps really ran at each precision
        limits = [value for name, value in self.gpu.set_calls if name == "set_power_limit_w"]
        assert any(w != self.default_w for w in limits), "the sweep set power limits"
        assert self.gpu.power_limit_w() == self.default_w  # restored at the end


def test_hf_trainer_callback_profiles_power_and_trials_precision(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from greentrain.integrations.hf import GreenTrainCallback, train

    job = Job(tmp_path)

    class Dataset(torch.utils.data.Dataset):
        ids = torch.randint(0, 64, (STEPS * 2, 8), generator=torch.Generator().manual_seed(0))

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    green = GreenTrainCallback("energy-optimal", **job.options())

    class Clock(transformers.TrainerCallback):  # runs before green's on_step_end: the step's duration
        def on_step_end(self, args, state, control, **kwargs) -> None:
            job.advance(green.driver.precision)

    transformers.set_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=8, n_embd=16, n_layer=1, n_head=2,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    model.register_forward_hook(lambda m, i, out: job.dtypes.add(out.logits.dtype))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=STEPS, per_device_train_batch_size=2, learning_rate=1e-3,
        report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True, seed=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Dataset(), callbacks=[Clock(), green])
    train(trainer)
    job.check()


def test_lightning_callback_profiles_power_and_trials_precision(tmp_path: Path) -> None:
    L = pytest.importorskip("lightning.pytorch")
    from greentrain.integrations.lightning import GreenTrainCallback

    job = Job(tmp_path)
    green = GreenTrainCallback("energy-optimal", **job.options())

    class Clock(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            job.advance(green.driver.precision)

    def batches() -> torch.utils.data.DataLoader:
        x = torch.randn(STEPS * 4, 8, generator=torch.Generator().manual_seed(1))
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x[:, :1]), batch_size=4)

    trainer = L.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path),
                        callbacks=[Clock(), green])
    from gt_lightning import Regressor

    trainer.fit(Regressor(batches, optimizer=torch.optim.SGD, seen=lambda out: job.dtypes.add(out.dtype)))
    green.close()
    job.check()


def test_accelerate_loop_profiles_power_and_trials_precision(tmp_path: Path) -> None:
    accelerate = pytest.importorskip("accelerate")
    from greentrain.integrations.accelerate import GreenAccelerate

    job = Job(tmp_path)
    accelerator = accelerate.Accelerator(cpu=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    xb = torch.randn(8, 4, generator=torch.Generator().manual_seed(2))  # one batch: the loss only falls
    yb = xb.sum(1, keepdim=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    green = GreenAccelerate(accelerator, "energy-optimal", checkpoint_dir=tmp_path / "ckpt", **job.options())
    green.begin(steps_total=STEPS)
    for _ in range(STEPS):
        with green.autocast():
            out = model(xb)
        job.dtypes.add(out.dtype)
        loss = torch.nn.functional.mse_loss(out.float(), yb)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        job.advance(green.precision)
        if green.step(loss=loss):
            break
    assert green.end() is False
    job.check()
