"""``--mesh auto``: valid layouts only, fits memory, lowest estimated energy per token, says why."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.runtime.config import load_config
from greentrain.runtime.mesh_planner import Hardware, plan_mesh

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
        assert c.pp * c.dp_replicate * c.dp_shard * c.cp * c.ep * c.tp == world
        assert cfg.model.n_heads % c.tp == 0 and cfg.model.kv_heads % c.tp == 0
        assert c.memory_gb <= 0.85 * 80
        assert c.ep == 1, "a dense model has no experts to spread"
        assert cfg.train.seq_len % (2 * c.cp) == 0
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


@pytest.mark.parametrize("world", [4, 8])
def test_moe_layouts_spread_experts_and_split_sequences(world: int) -> None:
    cfg, plan = _plan("1b-moe", world, memory_gb=80)
    layouts = {(c.cp, c.ep) for c in plan.candidates}
    assert any(ep > 1 for _, ep in layouts) and any(cp > 1 for cp, _ in layouts)
    assert {(1, world), (world, 1)} <= layouts, "all-expert-parallel and all-context-parallel both fit"
    for c in plan.candidates:
        assert cfg.model.n_experts % c.ep == 0 and c.pp * c.dp_replicate * c.dp_shard * c.cp * c.ep * c.tp == world
    # Spreading the experts divides their memory; sequence splits divide activations.
    by = {(c.pp, c.dp_replicate, c.dp_shard, c.cp, c.ep, c.tp): c for c in plan.candidates}
    assert by[(1, world, 1, 1, 1, 1)].memory_gb > by[(1, 1, 1, 1, world, 1)].memory_gb


def test_moe_expert_count_and_sequence_length_limit_the_layouts() -> None:
    cfg = load_config("1b-moe")
    plan = plan_mesh(cfg.model, world_size=32, seq_len=48, global_batch=32, hardware=Hardware(memory_gb=80))
    assert all(c.ep <= 16 and 48 % (2 * c.cp) == 0 for c in plan.candidates)
    assert any("ep=32 does not divide the 16 experts" in r for r in plan.rejected)
    assert any("cp=32: the sequence of 48 does not split" in r for r in plan.rejected)


def _auto(rank: int, world: int):
    from greentrain.runtime.trainer import Trainer

    cfg = tiny_config(parallel={"mesh": "auto", "device_memory_gb": 1.0, "auto_trials": 3, "auto_trial_steps": 1})
    trainer = Trainer(cfg)
    trials = [(t.layout.describe(), t.energy_per_token_j, t.source) for t in trainer.plan.trials]
    return trainer.dims.describe(), trainer.plan.reason, trials, [(m.loss, m.grad_norm) for m in trainer.fit()]


@pytest.mark.timeout(150)
def test_auto_mesh_measures_trials_chooses_the_least_energy_and_trains_like_the_reference() -> None:
    ref = reference()
    answers = run_ranks(_auto, 2, timeout_s=130)
    for layout, reason, trials, history in answers:
        assert reason.startswith(layout + " ac=") and "the lowest measured energy per token" in reason
        assert len(trials) == 3 and all(line in reason for line, *_ in trials)
        assert trials[0][0].startswith(layout + " ac=") and trials[0][1] == min(t[1] for t in trials)
        assert all(source.startswith(("measured", "integrated", "estimated")) for *_, source in trials)
        compare(ref, history, f"auto ({layout})")
    assert answers[0][:3] == answers[1][:3], "every rank chose the same from the same figures"
