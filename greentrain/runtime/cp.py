"""Context parallelism: ``apply_cp`` splits every sequence over the ``cp`` ranks, attention stays exact.

The sequence is cut into ``2 × cp`` equal chunks and rank ``i`` holds chunks
``i`` and ``2·cp − 1 − i``: under a causal mask the early chunks attend to
little and the late ones to much, so pairing them gives every rank the same
work (Llama 3's load balancing). Attention all-gathers the keys and values of
the whole sequence (Llama 3 style: K/V are small next to the activations
with grouped-query attention) and each local chunk attends to the prefix that
ends with it, through SDPA with a lower-right causal bias: the fused flash /
memory-efficient kernels where CUDA has them, the math kernel on the CPU.
Backward reduce-scatters the K/V gradients to their owners.

Everything else in a block is per token. What needs the whole sequence is
told here: rotary positions (the rows of the local chunks), the MoE balance
loss (its per-sequence sums are all-reduced), and the data (each rank keeps its
chunks' tokens and labels, ``load_balanced_positions``). The loss is a mean
over equally many tokens on every rank, so averaging it over the cp ranks (with
the data-parallel ones) gives the mean over the whole sequence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right

from greentrain.runtime.model import block_attention
from greentrain.runtime.moe import moe_layers

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from greentrain.runtime.model import Transformer

__all__ = ["apply_cp", "ContextParallelAttention", "load_balanced_positions", "gather_sequence",
           "all_reduce_sum"]


def load_balanced_positions(seq_len: int, cp: int, cp_rank: int) -> torch.Tensor:
    """Positions (into a sequence of ``seq_len``) that rank ``cp_rank`` of ``cp`` holds, in local order."""
    chunk = seq_len // (2 * cp)
    first, second = cp_rank, 2 * cp - 1 - cp_rank
    return torch.cat([torch.arange(first * chunk, (first + 1) * chunk),
                      torch.arange(second * chunk, (second + 1) * chunk)])


# torch 2.13 renamed the tensor collectives (the old names warn there); 2.11 has only the old ones.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


class _GatherSequence(torch.autograd.Function):
    """All-gather along dim 0 (stacked by rank); backward reduce-scatters the gradient to its owner."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        size = dist.get_world_size(group)
        out = x.new_empty((size * x.shape[0], *x.shape[1:]))  # rank-major along dim 0 (what gloo expects)
        _all_gather_single(out, x.contiguous(), group=group)
        return out.view(size, *x.shape)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out = grad.new_empty(grad.shape[1:])
        _reduce_scatter_single(out, grad.contiguous().flatten(0, 1), group=ctx.group)
        return out, None


class _AllReduceSum(torch.autograd.Function):
    """Sum over a group; the gradient of each rank's input is the sum of every rank's output gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out = grad.clone()
        dist.all_reduce(out, group=ctx.group)
        return out, None


@torch.compiler.disable
def gather_sequence(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """(cp, *x.shape): every rank's ``x``, autograd-aware."""
    return _GatherSequence.apply(x, group)


@torch.compiler.disable
def all_reduce_sum(x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Sum of ``x`` over ``group``, autograd-aware."""
    return _AllReduceSum.apply(x, group)


class ContextParallelAttention:
    """Attention core for one rank of ``cp``: local chunks ``rank`` and ``2·cp−1−rank`` of each sequence."""

    graph_safe = False
    """Its collectives run eagerly: a compiled block breaks its graph around them."""

    def __init__(self, group: dist.ProcessGroup, cp: int, cp_rank: int) -> None:
        self.group, self.cp, self.cp_rank = group, cp, cp_rank
        # The global chunk order as (rank, half): chunk m < cp is rank m's first half, else the second
        # half of rank 2cp-1-m.
        self._order = [(m, 0) if m < cp else (2 * cp - 1 - m, 1) for m in range(2 * cp)]

    def rope_rows(self, table: torch.Tensor, seq: int) -> torch.Tensor:
        positions = load_balanced_positions(seq * self.cp, self.cp, self.cp_rank).to(table.device)
        return table[positions]

    def _whole_sequence(self, kv: torch.Tensor) -> torch.Tensor:
        """(batch, local, ...) per rank → (batch, cp·local, ...) in sequence order."""
        gathered = gather_sequence(kv, self.group)  # (cp, batch, 2·chunk, ...)
        halves = gathered.chunk(2, dim=2)
        return torch.cat([halves[half][rank] for rank, half in self._order], dim=1)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_rep: int) -> torch.Tensor:
        chunk = q.shape[1] // 2
        kv = self._whole_sequence(torch.cat([k, v], dim=-1))  # one collective for both
        k_all, v_all = kv.split(k.shape[-1], dim=-1)
        if n_rep > 1:
            k_all = k_all.repeat_interleave(n_rep, dim=2)
            v_all = v_all.repeat_interleave(n_rep, dim=2)
        k_all, v_all = k_all.transpose(1, 2), v_all.transpose(1, 2)
        outs = []
        for half, index in enumerate((self.cp_rank, 2 * self.cp - 1 - self.cp_rank)):
            q_chunk = q[:, half * chunk:(half + 1) * chunk].transpose(1, 2)
            end = (index + 1) * chunk  # this chunk sees the sequence up to its own end, causally
            bias = causal_lower_right(chunk, end)
            outs.append(F.scaled_dot_product_attention(q_chunk, k_all[:, :, :end], v_all[:, :, :end],
                                                       attn_mask=bias))
        return torch.cat(outs, dim=2).transpose(1, 2)


def apply_cp(model: Transformer, cp_mesh: DeviceMesh) -> Transformer:
    """Make ``model`` (a Transformer or a pipeline stage of one) context-parallel over the 1-D ``cp_mesh``."""
    group, cp, rank = cp_mesh.get_group(), cp_mesh.size(), cp_mesh.get_local_rank()
    core = ContextParallelAttention(group, cp, rank)
    for block in model.layers.values():
        block_attention(block).core = core
    for moe in moe_layers(model):
        moe.reduce_sequence = lambda stats, group=group: all_reduce_sum(stats, group)
    return model
