"""Engine-facing contracts: ``Trainer.set_precision`` (all ranks, FSDP policy or autocast) and ``stage_times_s``."""

from __future__ import annotations

import pytest
import torch

from greentrain.errors import ConfigError
from greentrain.runtime.trainer import Trainer

from .harness import run_ranks, tiny_config

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _switch_on_fsdp(rank: int, world: int):
    from greentrain.runtime.fsdp import fsdp_modules

    trainer = Trainer(tiny_config(parallel={"dp_shard": 2}))
    first = trainer.train_step()
    trainer.set_precision("bf16")
    dtypes = {m._get_fsdp_state()._fsdp_param_group.mp_policy.param_dtype for m in fsdp_modules(trainer.built.parts[0])}
    second = trainer.train_step()
    trainer.set_precision("fp32")
    back = {m._get_fsdp_state()._fsdp_param_group.mp_policy.param_dtype for m in fsdp_modules(trainer.built.parts[0])}
    third = trainer.train_step()
    return first.loss, second.loss, second.precision, third.precision, dtypes, back


@pytest.mark.timeout(120)
def test_precision_switch_reaches_fsdp_policy_on_every_rank() -> None:
    ref = Trainer(tiny_config(parallel={"dp_shard": 1}))
    ref_losses = [ref.train_step().loss for _ in range(2)]
    results = run_ranks(_switch_on_fsdp, 2, timeout_s=100)
    for first, second, prec2, prec3, dtypes, back in results:
        assert abs(first - ref_losses[0]) <= 2e-6  # fp32 step matches the reference
        assert 1e-5 < abs(second - ref_losses[1]) < 5e-2  # bf16 step: close, but visibly not fp32
        assert (prec2, prec3) == ("bf16", "fp32")
        assert dtypes == {torch.bfloat16} and back == {torch.float32}
    assert results[0][1] == results[1][1], "both ranks must compute the same bf16 loss"


@pytest.mark.timeout(60)
def test_autocast_precision_without_fsdp_and_bad_name() -> None:
    fp32 = Trainer(tiny_config(parallel={"dp_shard": 1})).train_step().loss
    trainer = Trainer(tiny_config(parallel={"dp_shard": 1}, train={"dtype": "bf16"}))
    bf16 = trainer.train_step().loss
    assert 1e-5 < abs(bf16 - fp32) < 5e-2
    with pytest.raises(ConfigError, match="fp8"):
        trainer.set_precision("fp8")


def _pp_stage_times(rank: int, world: int):
    cfg = tiny_config(parallel={"pp": 2, "dp_shard": 1, "pp_schedule": "interleaved", "microbatches": 2})
    trainer = Trainer(cfg)
    trainer.train_step()
    chunks = [(s.forward_chunks, s.backward_chunks) for s in trainer.built.stages]
    return trainer.stage_times_s(), trainer.built.plan.local_stage_ids, chunks


@pytest.mark.timeout(120)
def test_stage_times_per_local_stage() -> None:
    for times, stage_ids, chunks in run_ranks(_pp_stage_times, 2, timeout_s=100):
        assert len(times) == len(stage_ids) == 2  # interleaved: two virtual stages per rank
        assert chunks == [(2, 2), (2, 2)]  # means are per microbatch: each stage ran 2 of them
        assert all(fwd > 0 and bwd > 0 for fwd, bwd in times)
    single = Trainer(tiny_config(parallel={"dp_shard": 1}))
    single.train_step()
    [(fwd, bwd)] = single.stage_times_s()
    assert fwd > 0 and bwd > 0
