"""PrecisionController: measured choice, loss guard, clear refusals, real autocast/scaler on CPU."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from greentrain.errors import ConfigError, NotSupportedError
from greentrain.precision import (
    Phase,
    PrecisionConfig,
    PrecisionController,
    unsupported_reason,
)
from greentrain.profiler import LocalCollective

pytestmark = pytest.mark.timeout(60)
FAST = PrecisionConfig(warmup_steps=1, trial_steps=4, guard_window=5, loss_tolerance=0.2)


def _drive(pc: PrecisionController, cost: dict[str, float], losses, steps: int) -> list[tuple[int, str]]:
    """Feed synthetic steps: energy per step by precision, loss by step; returns the switches."""
    switches = []
    for step in range(steps):
        loss = losses(step, pc.current)
        to = pc.on_step_end(loss, step_energy_j=cost[pc.current], step_time_s=0.1)
        if to is not None:
            switches.append((step, to))
    return switches


def test_picks_cheapest_measured_precision() -> None:
    pc = PrecisionController(("fp32", "bf16", "fp16"), config=FAST, collective=LocalCollective())
    cost = {"fp32": 10.0, "bf16": 12.0, "fp16": 7.0}
    switches = _drive(pc, cost, lambda s, p: 2.0 - 0.01 * s, 40)
    assert [to for _, to in switches] == ["bf16", "fp16"]  # trial order, then fp16 is already the cheapest
    assert pc.phase is Phase.SETTLED and pc.current == "fp16"
    assert pc.measured == {"fp32": 10.0, "bf16": 12.0, "fp16": 7.0}
    # never assumed: if fp32 measures cheapest (as bf16 autocast on many CPUs), fp32 is kept
    pc2 = PrecisionController(("fp32", "bf16"), config=FAST, collective=LocalCollective())
    switches = _drive(pc2, {"fp32": 5.0, "bf16": 9.0}, lambda s, p: 1.0, 30)
    assert [to for _, to in switches] == ["bf16", "fp32"] and pc2.current == "fp32"


def test_guard_reverts_on_planted_divergence_and_bans(caplog: pytest.LogCaptureFixture) -> None:
    pc = PrecisionController(("fp32", "bf16"), config=FAST, collective=LocalCollective())
    cost = {"fp32": 10.0, "bf16": 6.0}
    planted_at = 30

    def losses(step: int, precision: str) -> float:
        healthy = 2.0 - 0.01 * step
        return healthy * 3 if precision == "bf16" and step >= planted_at else healthy

    with caplog.at_level(logging.WARNING):
        switches = _drive(pc, cost, losses, 60)
    assert switches[0][1] == "bf16"  # the trial; bf16 measured cheaper, so it is kept
    reverted = [s for s, to in switches if to == "fp32"]
    assert reverted and planted_at <= reverted[0] < planted_at + FAST.guard_window
    assert pc.current == "fp32" and pc.banned == {"bf16"} and "diverged" in caplog.text
    with pytest.raises(ConfigError, match="reverted by the loss guard"):
        pc.request("bf16")


def test_guard_reverts_on_nan_during_trial() -> None:
    pc = PrecisionController(("fp32", "fp16", "bf16"), config=FAST, collective=LocalCollective())
    losses = lambda s, p: math.nan if p == "fp16" else 1.0  # noqa: E731
    switches = _drive(pc, {"fp32": 10.0, "fp16": 1.0, "bf16": 5.0}, losses, 30)
    assert [to for _, to in switches] == ["fp16", "fp32"]
    assert pc.banned == {"fp16"} and pc.current == "fp32" and pc.phase is Phase.SETTLED


def test_healthy_noise_within_tolerance_does_not_revert() -> None:
    pc = PrecisionController(("fp32", "bf16"), config=FAST, collective=LocalCollective())
    noisy = lambda s, p: 1.0 + (0.1 if s % 2 else -0.1)  # noqa: E731
    _drive(pc, {"fp32": 10.0, "bf16": 6.0}, noisy, 80)
    assert pc.current == "bf16" and not pc.banned


def test_rank_zero_decides() -> None:
    class Rank1:  # this process is rank 1: the broadcast returns rank 0's outcome
        rank = 1

        def all_reduce(self, values, op):
            return [v * 2 for v in values]

        def broadcast(self, obj):
            return {**obj, "decision": "bf16" if obj["decision"] else None} if obj["decision"] else obj

    pc = PrecisionController(("fp32", "bf16", "fp16"), config=FAST, collective=Rank1())
    # locally fp16 is next in the trial, but rank 0 said bf16: bf16 wins
    for _ in range(5):
        to = pc.on_step_end(1.0, 3.0, 0.1)
    assert to == "bf16" and pc.current == "bf16" and pc.measured["fp32"] == 6.0


def test_unsupported_precisions_refused_clearly() -> None:
    with pytest.raises(NotSupportedError) as info:
        PrecisionController(("fp32", "tf32", "fp8"), device_type="cpu")
    message = str(info.value)
    assert "tf32: tf32 needs an NVIDIA GPU with compute capability >= 8.0" in message
    assert "torchao is not installed (pip install torchao)" in message and "compute capability >= 8.9" in message
    with pytest.raises(ConfigError, match="'int4' is not one of"):
        unsupported_reason("int4", "cpu")
    with pytest.raises(ConfigError, match="duplicate"):
        PrecisionController(("fp32", "fp32"))
    with pytest.raises(ConfigError, match="loss_tolerance"):
        PrecisionConfig(loss_tolerance=0)
    if not torch.cuda.is_available():
        assert unsupported_reason("bf16", "cuda") == "device_type='cuda' but torch sees no CUDA device"


def test_request_from_policy_after_trial() -> None:
    pc = PrecisionController(("fp32", "bf16"), config=FAST, collective=LocalCollective())
    assert pc.request("bf16") is False  # still in the trial: the trial decides first
    _drive(pc, {"fp32": 5.0, "bf16": 9.0}, lambda s, p: 1.0, 20)
    assert pc.current == "fp32"
    assert pc.request("bf16") is True
    assert pc.on_step_end(1.0, 5.0, 0.1) == "bf16" and pc.current == "bf16"
    with pytest.raises(ConfigError, match="not in allowed"):
        pc.request("fp16")


def test_real_training_on_cpu_autocast_scaler_and_guard() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    pc = PrecisionController(("fp32", "bf16", "fp16"), config=FAST, collective=LocalCollective())
    seen_dtypes: dict[str, torch.dtype] = {}
    for step in range(45):
        if pc.current == "fp16" and step > 25:  # planted divergence: fp16 steps get a huge learning rate
            for group in opt.param_groups:
                group["lr"] = 50.0
        else:
            for group in opt.param_groups:
                group["lr"] = 0.05
        with pc.autocast():
            out = model(x)
            seen_dtypes[pc.current] = out.dtype
            loss = torch.nn.functional.mse_loss(out.float(), y)
        if pc.current == "fp16":
            assert pc.scaler.is_enabled()
        pc.backward_step(loss, opt)
        # energy per step: fp16 measures cheapest here, so it would be kept if it stayed healthy
        pc.on_step_end(loss, {"fp32": 3.0, "bf16": 2.0, "fp16": 1.0}[pc.current], 0.01)
    assert seen_dtypes == {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    assert "fp16" in pc.banned and pc.current == "bf16"  # reverted to the precision before fp16


def test_fp32_context_really_disables_tf32_and_restores_flags() -> None:
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default for convolutions
    try:
        pc = PrecisionController(("fp32",), collective=LocalCollective())
        with pc.autocast():
            assert torch.backends.cudnn.allow_tf32 is False and torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.backends.cudnn.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
