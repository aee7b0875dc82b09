"""Config files, presets and validation messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.runtime.config import config_from_dict, list_presets, load_config
from greentrain.runtime.model import count_params
from greentrain.runtime.parallel_dims import ParallelDims


def test_presets_exist_with_their_sizes() -> None:
    assert {"tiny", "125m", "1b"} <= set(list_presets())
    assert count_params(load_config("tiny").model) < 1e6
    assert 110e6 < count_params(load_config("125m").model) < 140e6
    assert 0.9e9 < count_params(load_config("1b").model) < 1.2e9


@pytest.mark.parametrize(("data", "message"), [
    ({"train": {"dtype": "fp8"}}, "train.dtype: 'fp8' is not 'fp32', 'bf16', 'fp16' or 'tf32'"),
    ({"train": {"steps": 0}}, "train.steps: must be >= 1"),
    ({"train": {"lr": "fast"}}, "train.lr: expected float"),
    ({"train": {"steps": True}}, "train.steps: expected int, got a boolean"),
    ({"model": {"dim": 30, "n_heads": 4}}, "model.dim: 30 must divide by model.n_heads=4"),
    ({"model": {"n_kv_heads": 3}}, "model.n_kv_heads: 3 must divide n_heads"),
    ({"parallel": {"pp_schedule": "zb"}}, "parallel.pp_schedule: 'zb' is not 'gpipe', '1f1b' or 'interleaved'"),
    ({"parallel": {"tpp": 2}}, "parallel.tpp: unknown key"),
    ({"trian": {}}, "unknown section [trian]"),
    ({"train": {"seq_len": 4096}}, "train.seq_len: 4096 exceeds model.max_seq_len"),
    ({"train": {"global_batch": 6, "grad_accum": 4}}, "train.global_batch: 6 must divide by train.grad_accum=4"),
])
def test_validation_names_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, origin="job.toml")
    assert str(info.value).startswith("job.toml: ") and message in str(info.value)


def test_toml_file_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "job.toml"
    good.write_text('[model]\ndim = 48\nn_heads = 4\n[train]\nsteps = 7\nlr = 1\n', encoding="utf-8")
    cfg = load_config(good)
    assert (cfg.model.dim, cfg.train.steps, cfg.train.lr) == (48, 7, 1.0)
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.toml:1:7: invalid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no such file or preset; presets: 125m, 1b, 1b-moe, tiny, tiny-moe"):
        load_config("huge")
    with pytest.raises(ConfigError, match="missing.toml: cannot read"):
        load_config(tmp_path / "missing.toml")


def test_replace_revalidates() -> None:
    cfg = load_config("tiny")
    assert cfg.replace("train", steps=3).train.steps == 3
    with pytest.raises(ConfigError, match="train.steps"):
        cfg.replace("train", steps=-1)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tp": 3, "world_size": 4}, "world size 4 does not divide by pp*dp_replicate*cp*ep*tp = 3"),
    ({"tp": 2, "dp_shard": 3, "world_size": 4}, "= 6, but the world size is 4"),
    ({"pp": 0, "world_size": 1}, "--pp: must be >= 1"),
])
def test_parallel_dims_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("*", r"\*")):
        ParallelDims(**kwargs)


def test_parallel_dims_fill_dp_shard() -> None:
    dims = ParallelDims(pp=2, tp=2, dp_replicate=1, world_size=8)
    assert (dims.dp_shard, dims.dp, dims.fsdp_enabled, dims.ddp_only) == (2, 2, True, False)
    assert ParallelDims(dp_replicate=2, dp_shard=1, world_size=2).ddp_only
