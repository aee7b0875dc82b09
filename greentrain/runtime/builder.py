"""Build the model parts, optimizers and pipeline schedule for one rank.

Order (as in torchtitan): model on the meta device → pipeline split → per part
TP → AC → compile → FSDP → materialise on the device with mesh-independent
weights. Optimizer parameter groups are split by DTensor mesh/placement so
AdamW's fused ``foreach`` kernels never mix meshes (norms and projections live
on different meshes when sequence parallelism is off).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor

from greentrain.errors import ConfigError
from greentrain.runtime.config import JobConfig
from greentrain.runtime.model import Transformer, init_weights
from greentrain.runtime.parallel_dims import ParallelDims
from greentrain.runtime.parallelize import parallelize
from greentrain.runtime.pipeline import (
    PipelinePlan,
    PipelineSchedule,
    TimedStage,
    build_schedule,
    build_stage_modules,
    plan_pipeline,
)

__all__ = ["Built", "build", "cross_entropy", "pick_device"]


def cross_entropy(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss in fp32 (works on vocab-sharded DTensor logits under loss_parallel)."""
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def pick_device(name: str) -> torch.device:
    """``auto`` → this rank's CUDA device when there is one, else the CPU."""
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError("train.device='cuda' but no CUDA device is visible; use 'cpu' or 'auto'")
    import os

    index = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


@dataclass(slots=True)
class Built:
    """Everything the trainer steps."""

    parts: list[Transformer]
    """The model, or this rank's pipeline stages of it (parallelized: FSDP makes each an ``FSDPModule`` too)."""
    optimizers: list[torch.optim.Optimizer]
    plan: PipelinePlan | None = None
    schedule: PipelineSchedule | None = None
    stages: list[TimedStage] = field(default_factory=list)

    @property
    def params(self) -> list[nn.Parameter]:
        return [p for part in self.parts for p in part.parameters()]


def _param_groups(part: nn.Module) -> list[dict]:
    groups: dict[object, list[nn.Parameter]] = defaultdict(list)
    for p in part.parameters():
        key = (id(p.device_mesh), tuple(p.placements)) if isinstance(p, DTensor) else "plain"
        groups[key].append(p)
    return [{"params": ps} for ps in groups.values()]


def fused_supported(device: torch.device) -> bool:
    """Whether this torch build has fused AdamW kernels for ``device``'s type."""
    try:
        from torch.optim.optimizer import _get_fused_kernels_supported_devices
    except ImportError:  # private helper: gone in some build means we cannot tell, so do not assume
        return False
    return device.type in _get_fused_kernels_supported_devices()


def make_optimizer(part: nn.Module, cfg: JobConfig, device: torch.device) -> torch.optim.Optimizer:
    """AdamW with one parameter group per mesh layout: fused kernels where the device has them, else foreach.

    On one H100 (1b shape) foreach instead of fused cost 7.5 % of the step rate (measured 2026-11-23).
    """
    def adamw(*, fused: bool | None = None, foreach: bool | None = None) -> torch.optim.Optimizer:
        return torch.optim.AdamW(_param_groups(part), lr=cfg.train.lr, betas=(0.9, 0.95), eps=1e-8,
                                 weight_decay=cfg.train.weight_decay, fused=fused, foreach=foreach)

    if fused_supported(device):
        try:
            return adamw(fused=True)
        except (RuntimeError, TypeError):  # e.g. a parameter dtype or layout the fused kernel rejects
            pass
    return adamw(foreach=True)


def build(cfg: JobConfig, dims: ParallelDims, device: torch.device, local_batch: int,
          loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Built:
    """Build this rank's model parts (and pipeline schedule), materialised on ``device``."""
    with torch.device("meta"):
        model = Transformer(cfg.model)
    if not dims.pp_enabled:
        parts = [model]
        plan = None
    else:
        par = cfg.parallel
        microbatches = par.microbatches or par.pp * (par.virtual_stages if par.pp_schedule == "interleaved" else 1)
        plan = plan_pipeline(cfg.model.n_layers, dims.pp, dims.mesh["pp"].get_local_rank(), par.pp_schedule,
                             par.virtual_stages, microbatches, local_batch // cfg.train.grad_accum)
        parts = build_stage_modules(model, plan)
    for part in parts:
        parallelize(part, dims, cfg)
        init_weights(part, cfg.model, cfg.train.seed, device)
    optimizers = [make_optimizer(part, cfg, device) for part in parts]
    built = Built(parts=parts, optimizers=optimizers, plan=plan)
    if plan is not None:
        built.schedule, built.stages = build_schedule(
            parts, plan, schedule=cfg.parallel.pp_schedule, microbatches=microbatches, device=device,
            group=dims.mesh["pp"].get_group(), loss_fn=loss_fn)
    return built
