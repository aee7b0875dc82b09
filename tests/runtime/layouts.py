"""Layouts exercised against the single-process reference, and the comparison itself."""

from __future__ import annotations

from typing import Any

__all__ = ["LAYOUTS", "run_layouts", "reference", "compare", "LOSS_ATOL", "NORM_RTOL"]

LOSS_ATOL = 2e-6
NORM_RTOL = 1e-5

_NO_SP = {"sequence_parallel": False, "loss_parallel": False}
_AOT = {"compile": True, "compile_backend": "aot_eager"}

# world size -> name -> (parallel overrides, train overrides)
LAYOUTS: dict[int, dict[str, tuple[dict[str, Any], dict[str, Any]]]] = {
    2: {
        "ddp": ({"dp_replicate": 2, "dp_shard": 1}, {}),
        "fsdp": ({"dp_shard": 2}, {}),
        "fsdp-zero2-accum": ({"dp_shard": 2, "reshard_after_forward": False}, {"grad_accum": 2}),
        "fsdp-ac-full": ({"dp_shard": 2}, {"ac": "full"}),
        "fsdp-ac-selective-op": ({"dp_shard": 2}, {"ac": "selective-op"}),
        "fsdp-cpu-offload-ac-layer": ({"dp_shard": 2, "cpu_offload": True}, {"ac": "selective-layer"}),
        "fsdp-compiled": ({"dp_shard": 2}, _AOT),
        "tp": ({"tp": 2, "dp_shard": 1, **_NO_SP}, {}),
        "tp-sp-lossparallel": ({"tp": 2, "dp_shard": 1}, {}),
        "pp-gpipe": ({"pp": 2, "dp_shard": 1, "pp_schedule": "gpipe", "microbatches": 2}, {}),
        "pp-1f1b": ({"pp": 2, "dp_shard": 1, "pp_schedule": "1f1b", "microbatches": 4}, {}),
        "pp-interleaved": ({"pp": 2, "dp_shard": 1, "pp_schedule": "interleaved", "microbatches": 4,
                            "virtual_stages": 2}, {}),
    },
    4: {
        "hsdp": ({"dp_replicate": 2, "dp_shard": 2}, {}),
        "fsdp-x-tp": ({"dp_shard": 2, "tp": 2}, {}),
        "ddp-x-tp-nosp": ({"dp_replicate": 2, "dp_shard": 1, "tp": 2, **_NO_SP}, {}),
        "fsdp-x-tp-compiled": ({"dp_shard": 2, "tp": 2}, _AOT),
        "pp-x-fsdp": ({"pp": 2, "dp_shard": 2, "pp_schedule": "1f1b", "microbatches": 2}, {}),
        "pp-x-tp": ({"pp": 2, "dp_shard": 1, "tp": 2, "pp_schedule": "interleaved", "microbatches": 2}, {}),
    },
    8: {
        "pp-x-fsdp-x-tp": ({"pp": 2, "dp_shard": 2, "tp": 2, "pp_schedule": "1f1b", "microbatches": 2}, {}),
    },
}


def _history(cfg) -> list[tuple[float, float]]:
    from greentrain.runtime.trainer import Trainer

    return [(m.loss, m.grad_norm) for m in Trainer(cfg).fit()]


def reference() -> list[tuple[float, float]]:
    """Single process, fp32, no parallelism: what every layout must reproduce."""
    from .harness import tiny_config

    return _history(tiny_config(parallel={"dp_shard": 1}))


def run_layouts(rank: int, world: int, names: list[str]) -> dict[str, list[tuple[float, float]]]:
    """In a forked rank: run each named layout of this world size; every rank returns its view."""
    from .harness import tiny_config

    out = {}
    for name in names:
        par, train = LAYOUTS[world][name]
        out[name] = _history(tiny_config(parallel=par, train=train))
    return out


def compare(ref: list[tuple[float, float]], got: list[tuple[float, float]], label: str) -> None:
    """Raise AssertionError unless every step matches on loss (atol) AND pre-clip grad norm (rtol)."""
    assert len(got) == len(ref), f"{label}: {len(got)} steps, reference has {len(ref)}"
    for step, ((rl, rn), (gl, gn)) in enumerate(zip(ref, got), start=1):
        assert abs(gl - rl) <= LOSS_ATOL, f"{label} step {step}: loss {gl!r} != reference {rl!r}"
        assert abs(gn - rn) <= NORM_RTOL * abs(rn), f"{label} step {step}: grad_norm {gn!r} != reference {rn!r}"
