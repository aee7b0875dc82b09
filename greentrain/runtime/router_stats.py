"""Router statistics of a MoE model, per optimizer step and global over all ranks.

Each MoE block counts the tokens its router sends to each expert (before any
capacity drop) and sums its balance loss, but only during a real forward
(``recording``): not during a recomputation under activation checkpointing,
nor the pipeline's shape inference. After the step the per-block counts are
summed over every rank that holds different tokens and over the pipeline
stages (each holds other blocks), on the device, with no host read: the
values travel with the loss to the next metrics fetch.

Reported: tokens per expert (summed over blocks), the imbalance (the busiest
expert's tokens over the mean, the worst block; 1.0 is perfect balance) and
the auxiliary loss (per-block balance losses summed, averaged over the step's
micro-batches).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import nn

from greentrain.runtime.moe import MoE, block_moe

if TYPE_CHECKING:
    from greentrain.runtime.model import Transformer

__all__ = ["RouterStats", "RouterSummary", "set_aux_grad_scale"]


def _blocks_with_moe(part: Transformer) -> list[tuple[int, MoE]]:
    out = []
    for key, block in part.layers.items():
        if getattr(block, "moe_enabled", False):
            out.append((int(key), block_moe(block)))
    return out


def set_aux_grad_scale(parts: Sequence[Transformer], scale: float) -> None:
    """The auxiliary loss's weight in backward for every MoE block (``aux_loss_coef / grad_accum``)."""
    for part in parts:
        for _, moe in _blocks_with_moe(part):
            moe.aux_grad_scale = scale


@dataclass(frozen=True, slots=True)
class RouterSummary:
    """One step's router statistics, as the metrics report them."""

    aux_loss: float
    imbalance: float
    tokens_per_expert: list[int]

    @classmethod
    def from_packed(cls, values: list[float], n_experts: int) -> "RouterSummary":
        return cls(aux_loss=values[0], imbalance=values[1],
                   tokens_per_expert=[int(round(v)) for v in values[2:2 + n_experts]])


class RouterStats:
    """Collects the MoE blocks of this rank's model parts; ``summarise`` packs one step's global numbers."""

    def __init__(self, parts: Sequence[Transformer], n_layers: int, n_experts: int) -> None:
        self.layers = [pair for part in parts for pair in _blocks_with_moe(part)]
        self.n_layers, self.n_experts = n_layers, n_experts

    @property
    def enabled(self) -> bool:
        return self.n_experts > 0

    def start_step(self, device: torch.device) -> None:
        for _, moe in self.layers:
            moe.reset_stats(device)

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Count what the routers do inside this block (a real forward pass)."""
        for _, moe in self.layers:
            moe.recording = True
        try:
            yield
        finally:
            for _, moe in self.layers:
                moe.recording = False

    def summarise(self, device: torch.device, groups: list[dist.ProcessGroup]) -> torch.Tensor:
        """[aux_loss, imbalance, tokens per expert...] over all ranks (collectives over ``groups``)."""
        table = torch.zeros(self.n_layers, self.n_experts + 2, device=device)
        for index, moe in self.layers:
            table[index, :self.n_experts] = moe.tokens_per_expert.float()
            table[index, -2] = moe.aux_sum
            table[index, -1] = moe.calls
        for group in groups:
            dist.all_reduce(table, group=group)
        counts, aux_sum, calls = table[:, :self.n_experts], table[:, -2], table[:, -1]
        moe_rows = calls > 0
        aux = (aux_sum[moe_rows] / calls[moe_rows]).sum()
        per_block = counts[moe_rows]
        imbalance = (per_block.max(1).values / per_block.mean(1).clamp_min(1e-9)).max() if per_block.numel() \
            else torch.ones((), device=device)
        return torch.cat([aux.reshape(1), imbalance.reshape(1), counts.sum(0)])
