"""Pipeline placement and its validation (no processes needed)."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.runtime.model import Transformer
from greentrain.runtime.pipeline import build_stage_modules, plan_pipeline, split_layers

from .harness import tiny_config


def test_split_layers_contiguous_and_even() -> None:
    assert split_layers(7, 3) == [[0, 1, 2], [3, 4], [5, 6]]
    with pytest.raises(ConfigError, match="n_layers=2 is fewer than the 4 pipeline stages"):
        split_layers(2, 4)


def test_interleaved_places_stages_round_robin() -> None:
    plan = plan_pipeline(8, pp=2, pp_rank=1, schedule="interleaved", virtual_stages=2, microbatches=4, local_batch=8)
    assert plan.n_stages == 4 and plan.local_stage_ids == (1, 3)
    assert plan.layers_per_stage == ((0, 1), (2, 3), (4, 5), (6, 7))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"schedule": "1f1b", "microbatches": 1}, "the 1f1b schedule needs at least --pp=2"),
    ({"schedule": "interleaved", "microbatches": 3}, "interleaved 1F1B needs a multiple of --pp=2"),
    ({"schedule": "gpipe", "microbatches": 3}, "must divide the per-rank batch of 4"),
])
def test_schedule_constraints(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_pipeline(4, pp=2, pp_rank=0, virtual_stages=2, local_batch=4, **kwargs)


def test_stage_modules_keep_global_names() -> None:
    import torch

    cfg = tiny_config().model
    with torch.device("meta"):
        model = Transformer(cfg)
    plan = plan_pipeline(4, pp=2, pp_rank=1, schedule="gpipe", virtual_stages=1, microbatches=2, local_batch=4)
    [last] = build_stage_modules(model, plan)
    names = {n for n, _ in last.named_parameters()}
    assert any(n.startswith("layers.2.") for n in names) and not any(n.startswith("layers.0.") for n in names)
    assert last.tok_embeddings is None and last.output is not None
