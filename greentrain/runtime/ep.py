"""Expert parallelism: ``apply_ep`` spreads each MoE block's routed experts over the ``ep`` ranks.

Rank ``r`` of ``ep`` holds experts ``[r·E/ep, (r+1)·E/ep)`` (a DTensor
sharded on the expert dimension, so checkpoints name the whole ``(E, ...)``
tensor and reshard to any ``ep``). The ``ep`` ranks see different sequences:
for every other parameter they are data-parallel ranks. Each rank routes its
own tokens, sorts them by expert, and one ``all_to_all_single`` sends every
token to the rank of its expert (the counts go first, so each rank knows what
it receives: dropless, no padding); the outputs come back by the reverse
all-to-all. Both are autograd-aware: backward runs the same exchanges the
other way. An expert's gradient sums the contributions of every ``ep`` rank's
tokens; the experts scale it by ``1/ep`` so it is the same data-parallel
mean the dense parameters get from FSDP.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard

from greentrain.runtime.moe import GroupedExperts, moe_layers

__all__ = ["apply_ep", "AllToAllDispatch", "all_to_all"]


class _AllToAll(torch.autograd.Function):
    """``all_to_all_single`` with uneven splits along dim 0; backward is the reverse exchange."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, out_splits: list[int], in_splits: list[int],
                group: dist.ProcessGroup) -> torch.Tensor:
        ctx.splits, ctx.group = (out_splits, in_splits), group
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out_splits, in_splits = ctx.splits
        back = grad.new_empty((sum(in_splits), *grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), in_splits, out_splits, group=ctx.group)
        return back, None, None, None


def all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int],
               group: dist.ProcessGroup) -> torch.Tensor:
    """Send ``in_splits[r]`` rows of ``x`` to rank ``r``; receive ``out_splits[r]`` from it (autograd-aware)."""
    return _AllToAll.apply(x, out_splits, in_splits, group)


def _expert_major(counts: torch.Tensor) -> torch.Tensor:
    """Index that reorders rows laid out (source, expert) by ``counts[source, expert]`` into (expert, source)."""
    flat = counts.reshape(-1)
    starts = (torch.cumsum(flat, 0) - flat).view_as(counts)
    lengths = counts.t().reshape(-1)
    seg_starts = starts.t().reshape(-1)
    total = int(flat.sum())
    offsets = torch.arange(total, device=counts.device) - torch.repeat_interleave(
        torch.cumsum(lengths, 0) - lengths, lengths, output_size=total)
    return torch.repeat_interleave(seg_starts, lengths, output_size=total) + offsets


class AllToAllDispatch:
    """Tokens sorted by global expert → the ranks holding those experts → back, over one ``ep`` group."""

    def __init__(self, group: dist.ProcessGroup, ep: int) -> None:
        self.group, self.ep = group, ep

    @torch.compiler.disable  # data-dependent sizes and host reads: eager, even inside a compiled block
    def __call__(self, tokens: torch.Tensor, counts: torch.Tensor, experts: GroupedExperts) -> torch.Tensor:
        n_local = counts.numel() // self.ep
        received_counts = torch.empty_like(counts)
        dist.all_to_all_single(received_counts, counts, group=self.group)  # n_local counts per rank each way
        by_rank = torch.stack([counts, received_counts]).view(2, self.ep, n_local)
        send_splits, recv_splits = by_rank.sum(-1).tolist()  # the one host read of the dispatch
        received = all_to_all(tokens, recv_splits, send_splits, self.group)
        grid = received_counts.view(self.ep, n_local)
        order = _expert_major(grid)
        out = experts(received[order], grid.sum(0).tolist())
        restored = out[torch.argsort(order)]
        return all_to_all(restored, send_splits, recv_splits, self.group)


def _shard_experts(experts: GroupedExperts, ep_mesh) -> None:
    """Replace each (E, ...) weight by a DTensor sharded on dim 0 over ``ep_mesh`` (works on meta too)."""
    ep, rank = ep_mesh.size(), ep_mesh.get_local_rank()
    for name, param in list(experts.named_parameters(recurse=False)):
        rows = param.shape[0] // ep
        local = param.detach()[rank * rows:(rank + 1) * rows]
        local = torch.empty_like(local) if param.is_meta else local.clone()
        dtensor = DTensor.from_local(local, ep_mesh, [Shard(0)], run_check=False,
                                     shape=param.shape, stride=param.stride())
        setattr(experts, name, nn.Parameter(dtensor, requires_grad=param.requires_grad))


def apply_ep(model: nn.Module, ep_mesh: DeviceMesh) -> nn.Module:
    """Spread the routed experts of every MoE block in ``model`` over the 1-D ``ep_mesh`` (in place)."""
    from greentrain.errors import ConfigError

    ep, group = ep_mesh.size(), ep_mesh.get_group()
    layers = moe_layers(model)
    for moe in layers:
        if moe.n_experts % ep:
            raise ConfigError(f"--ep {ep}: model.n_experts={moe.n_experts} must divide by it")
        _shard_experts(moe.experts, ep_mesh)
        moe.experts.grad_scale = 1.0 / ep
        moe.dispatch = AllToAllDispatch(group, ep)
    return model
