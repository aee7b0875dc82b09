"""``torch.compile``: per block (``apply_compile``) or the whole model (``apply_compile_whole``).

Under FSDP, TP or pipelining, each block is compiled separately (before
``fully_shard``), which keeps the FSDP hooks and pipeline boundaries out of
the compiled region and lets all blocks share one compiled graph (parameters
are graph inputs). On one device nothing sits between the blocks, and one
graph for the whole model also fuses the embedding, final norm, output
projection and the seams between blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from greentrain.runtime.model import block_attention

if TYPE_CHECKING:
    from greentrain.runtime.model import Transformer

__all__ = ["apply_compile", "apply_compile_whole"]


def apply_compile(model: Transformer, *, backend: str = "inductor") -> Transformer:
    """Compile every transformer block of ``model`` in place (no dynamic shapes).

    A block is one full graph unless it holds collectives with data-dependent sizes (a MoE block's
    token dispatch, the context-parallel K/V gather): those run eagerly between compiled pieces.
    """
    for block in model.layers.values():
        whole = not getattr(block, "moe_enabled", False) and block_attention(block).core.graph_safe
        block.compile(backend=backend, fullgraph=whole, dynamic=False)
    return model


def apply_compile_whole(model: nn.Module, *, backend: str = "inductor") -> nn.Module:
    """Compile ``model``'s forward as one graph, in place (parameter names and state dict unchanged)."""
    model.compile(backend=backend, dynamic=False)
    return model
