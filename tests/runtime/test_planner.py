"""``--mesh auto``: valid layouts only, fits memory, lowest estimated energy per token, says why."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.runtime.config import load_config
from greentrain.runtime.planner import Hardware, plan_mesh

from .harness import run_ranks, tiny_config
from .layouts import compare, reference

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _plan(preset: str, world: int, **hw):
    cfg = load_config(preset)
    return cfg, plan_mesh(cfg.model, world_size=world, seq_len=cfg.train.seq_len,
                          global_batch=cfg.train.global_batch, hardware=Hardware(**hw))


@pytest.mark.parametrize("world", [1, 2, 4, 8, 16])
def test_every_candidate_is_valid_and_best_is_cheapest(world: int) -> None:
    cfg, plan = _plan("1b", world, memory_gb=80)
    for c in plan.candidates:
        assert c.pp * c.dp_replicate * c.dp_shard * c.tp == world
        assert cfg.model.n_heads % c.tp == 0 and cfg.model.kv_heads % c.tp == 0
        assert c.memory_gb <= 0.85 * 80
    assert plan.best.energy_per_token_j == min(c.energy_per_token_j for c in plan.candidates)
    assert plan.best.describe() in plan.reason and "lowest estimated energy per token" in plan.reason


def test_rejections_are_explained() -> None:
    _, plan = _plan("1b", 16, memory_gb=80)
    assert any("tp=16 does not divide the 16 heads / 8 kv heads" in r or "spans nodes" in r for r in plan.rejected)


def test_small_memory_forces_sharding_and_checkpointing() -> None:
    _, roomy = _plan("1b", 8, memory_gb=1000)
    _, tight = _plan("1b", 8, memory_gb=12)
    assert tight.best.memory_gb <= 0.85 * 12
    assert tight.best.ac == "full" or tight.best.dp_shard * tight.best.tp * tight.best.pp > 1
    assert roomy.best.memory_gb > tight.best.memory_gb or roomy.best == tight.best


def test_nothing_fits_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="--mesh auto: no layout of 1 devices fits"):
        _plan("1b", 1, memory_gb=4)


def _auto(rank: int, world: int):
    from greentrain.runtime.trainer import Trainer

    trainer = Trainer(tiny_config(parallel={"mesh": "auto", "device_memory_gb": 1.0}))
    return trainer.dims.describe(), trainer.plan.reason, [(m.loss, m.grad_norm) for m in trainer.fit()]


@pytest.mark.timeout(120)
def test_auto_mesh_trains_like_the_reference() -> None:
    ref = reference()
    for layout, reason, history in run_ranks(_auto, 2, timeout_s=100):
        assert reason.startswith(layout + " ac=")
        compare(ref, history, f"auto ({layout})")
