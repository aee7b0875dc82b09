"""A real Accelerate loop (CPU) pauses on a replayed dirty spell, saves its state, resumes, and
ends identical to an uninterrupted run."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

import torch  # noqa: E402  (a dev dependency: missing is an error)
import accelerate  # noqa: E402  (a dev dependency: missing is an error)

from gt_dirty_spell import T0, dirty_spell_trace  # noqa: E402

from greentrain.clock import ReplayClock  # noqa: E402
from greentrain.integrations.accelerate import GreenAccelerate  # noqa: E402

STEPS = 20


def setup(accelerator):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(STEPS * 4, 4, generator=torch.Generator().manual_seed(2))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    return accelerator.prepare(model, optimizer, loader)


def one_step(accelerator, model, optimizer, batch):
    x, y = batch
    loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    return loss


def green(accelerator, tmp_path: Path, start: timedelta = timedelta(minutes=59, seconds=57),
          **kwargs) -> GreenAccelerate:
    clock = ReplayClock(T0 + start, speedup=3600.0)
    policy = tmp_path / "policy.toml"
    policy.write_text('[policy]\nkind = "threshold"\nthreshold_g_per_kwh = 200\n\n[settings]\nresume_overhead_s = 0\n')
    return GreenAccelerate(accelerator, str(policy), checkpoint_dir=tmp_path / "ckpt", clock=clock, zone="GB",
                           provider=f"csv:{dirty_spell_trace(tmp_path)}",
                           deadline=T0 + timedelta(hours=24), devices=False, progress=False,
                           decide_interval_s=1.0, **kwargs)


@pytest.mark.timeout(120)
def test_accelerate_loop_pauses_saves_resumes_and_matches(tmp_path: Path) -> None:
    accelerator = accelerate.Accelerator(cpu=True)
    model, optimizer, loader = setup(accelerator)
    for batch in loader:
        one_step(accelerator, model, optimizer, batch)
    reference = {k: v.clone() for k, v in model.state_dict().items()}

    accelerator = accelerate.Accelerator(cpu=True)
    model, optimizer, loader = setup(accelerator)
    helper = green(accelerator, tmp_path)
    rounds, pauses = 0, 0
    again = True
    while again:
        rounds += 1
        start = helper.begin(steps_total=STEPS)
        for batch in accelerator.skip_first_batches(loader, start):
            one_step(accelerator, model, optimizer, batch)
            if helper.step():
                pauses += 1
                assert (tmp_path / "ckpt" / "greentrain.json").exists()
                break
        again = helper.end()
    assert pauses >= 1 and rounds == pauses + 1
    assert helper.next_step == STEPS
    for name, tensor in reference.items():
        assert torch.equal(model.state_dict()[name], tensor), name
    assert not (tmp_path / "ckpt" / "greentrain.json").exists()  # finished: nothing left to resume


@pytest.mark.timeout(120)
def test_exit_for_the_scheduler_then_a_fresh_process_resumes_from_the_saved_state(tmp_path: Path) -> None:
    accelerator = accelerate.Accelerator(cpu=True)
    model, optimizer, loader = setup(accelerator)
    for batch in loader:
        one_step(accelerator, model, optimizer, batch)
    reference = {k: v.clone() for k, v in model.state_dict().items()}

    def run(start: timedelta) -> tuple[dict, GreenAccelerate]:
        accelerator = accelerate.Accelerator(cpu=True)
        model, optimizer, loader = setup(accelerator)  # fresh weights: only the checkpoint carries progress
        helper = green(accelerator, tmp_path, start, after_pause="exit")
        start = helper.begin(steps_total=STEPS)
        for batch in accelerator.skip_first_batches(loader, start):
            one_step(accelerator, model, optimizer, batch)
            if helper.step():
                break
        helper.end()
        return model.state_dict(), helper

    with pytest.raises(SystemExit) as exited:
        run(timedelta(minutes=59, seconds=57))
    assert exited.value.code == 75
    paused_at = json.loads((tmp_path / "ckpt" / "greentrain.json").read_text())
    assert paused_at == {"paused": True}
    final, helper = run(timedelta(hours=3))  # the relaunch, after the dirty spell: loads ckpt/, continues
    assert helper.next_step == STEPS
    assert helper.driver.state() is None  # closed
    for name, tensor in reference.items():
        assert torch.equal(final[name], tensor), name
