"""Gradient norm and clipping that are correct on any mesh.

Each parameter's gradient is a DTensor (sharded or replicated over some mesh
dims) or a plain tensor (identical on every rank that holds it). Grouping by
mesh, ``get_total_norm`` on DTensors yields a partial norm that
``full_tensor()`` reduces over exactly the dims the gradient is sharded on;
plain gradients count once. Pipeline stages hold disjoint parameters, so the
p-th powers are summed across the pipeline group last.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

__all__ = ["grad_norm", "clip_grad_norm_"]


def _norm_pow(grads: list[torch.Tensor], norm_type: float) -> torch.Tensor:
    total = torch.nn.utils.get_total_norm(grads, norm_type=norm_type, foreach=True)
    if isinstance(total, DTensor):
        total = total.full_tensor()
    return total.float() ** norm_type if math.isfinite(norm_type) else total.float()


def grad_norm(params: list[torch.nn.Parameter], norm_type: float = 2.0, pp_group=None) -> torch.Tensor:
    """Global gradient norm over all ``params`` of all ranks (a 0-d float tensor)."""
    groups: dict[object, list[torch.Tensor]] = defaultdict(list)
    device = None
    for p in params:
        if p.grad is None:
            continue
        key = (p.grad.device_mesh, tuple(p.grad.placements)) if isinstance(p.grad, DTensor) else "local"
        groups[key].append(p.grad)
        device = p.grad.device
    device = device or (params[0].device if params else torch.device("cpu"))
    parts = [_norm_pow(grads, norm_type) for grads in groups.values()]
    if math.isfinite(norm_type):
        total = torch.stack(parts).sum() if parts else torch.zeros((), device=device)
    else:
        total = torch.stack(parts).max() if parts else torch.zeros((), device=device)
    if pp_group is not None:
        op = dist.ReduceOp.SUM if math.isfinite(norm_type) else dist.ReduceOp.MAX
        dist.all_reduce(total, op=op, group=pp_group)
    return total ** (1.0 / norm_type) if math.isfinite(norm_type) else total


@torch.no_grad()
def clip_grad_norm_(params: list[torch.nn.Parameter], max_norm: float, norm_type: float = 2.0,
                    pp_group=None) -> torch.Tensor:
    """Scale gradients so their global norm is at most ``max_norm``; return the pre-clip norm."""
    total = grad_norm(params, norm_type, pp_group)
    if max_norm > 0:
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for p in params:
            if p.grad is not None:
                g = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
                g.mul_(coef.to(g.device, g.dtype))
    return total
