"""Hybrid-parallel training runtime built on PyTorch's own distributed engine.

DeviceMesh (``pp × dp_replicate × dp_shard × cp × ep × tp``), FSDP2
``fully_shard``, DTensor tensor/sequence/loss parallelism, context
parallelism, expert parallelism for mixture-of-experts blocks,
``torch.distributed.pipelining`` and ``torch.distributed.checkpoint``, applied
to a reference decoder-only transformer, with greentrain's step-boundary decisions (pause via checkpoint,
precision switch, per-stage timings) built in. Importing this package does not
import torch.distributed modules until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what each lazy name is, for type checkers; at run time __getattr__ imports it on first use
    from greentrain.runtime.ac import apply_ac
    from greentrain.runtime.autolayout import choose_layout
    from greentrain.runtime.checkpoint import Checkpointer
    from greentrain.runtime.clip import clip_grad_norm_, grad_norm
    from greentrain.runtime.compiling import apply_compile
    from greentrain.runtime.config import JobConfig, config_from_dict, list_presets, load_config
    from greentrain.runtime.cp import apply_cp
    from greentrain.runtime.ep import apply_ep
    from greentrain.runtime.fsdp import apply_fsdp
    from greentrain.runtime.greentrain_hooks import run_training
    from greentrain.runtime.mesh_planner import plan_mesh
    from greentrain.runtime.metrics import StepMetrics
    from greentrain.runtime.model import Transformer, init_weights
    from greentrain.runtime.moe import MoE
    from greentrain.runtime.parallel_dims import ParallelDims
    from greentrain.runtime.parallelize import parallelize
    from greentrain.runtime.pipeline import build_schedule, build_stage_modules
    from greentrain.runtime.tp import apply_tp
    from greentrain.runtime.trainer import Trainer

__all__ = [
    "JobConfig", "load_config", "config_from_dict", "list_presets",
    "ParallelDims", "Transformer", "init_weights",
    "apply_tp", "apply_cp", "apply_ep", "apply_fsdp", "apply_ac", "apply_compile", "parallelize", "MoE",
    "build_schedule", "build_stage_modules",
    "clip_grad_norm_", "grad_norm", "Checkpointer",
    "Trainer", "StepMetrics", "plan_mesh", "choose_layout", "run_training",
]

_WHERE = {
    "JobConfig": "config", "load_config": "config", "config_from_dict": "config", "list_presets": "config",
    "ParallelDims": "parallel_dims", "Transformer": "model", "init_weights": "model",
    "apply_tp": "tp", "apply_cp": "cp", "apply_ep": "ep", "MoE": "moe", "choose_layout": "autolayout",
    "apply_fsdp": "fsdp", "apply_ac": "ac", "apply_compile": "compiling",
    "parallelize": "parallelize", "build_schedule": "pipeline", "build_stage_modules": "pipeline",
    "clip_grad_norm_": "clip", "grad_norm": "clip", "Checkpointer": "checkpoint",
    "Trainer": "trainer", "StepMetrics": "metrics", "plan_mesh": "mesh_planner", "run_training": "greentrain_hooks",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'greentrain.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(f"greentrain.runtime.{module}"), name)
