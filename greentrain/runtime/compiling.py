"""``torch.compile``: per block (``apply_compile``) or the whole model (``apply_compile_whole``).

Under FSDP, TP or pipelining, each block is compiled separately (before
``fully_shard``), which keeps the FSDP hooks and pipeline boundaries out of
the compiled region and lets all blocks share one compiled graph (parameters
are graph inputs). On one device nothing sits between the blocks, and one
graph for the whole model also fuses the embedding, final norm, output
projection and the seams between blocks.
"""

from __future__ import annotations

from torch import nn

__all__ = ["apply_compile", "apply_compile_whole"]


def apply_compile(model: nn.Module, *, backend: str = "inductor") -> nn.Module:
    """Compile every transformer block of ``model`` in place (full graph, no dynamic shapes)."""
    for block in model.layers.values():
        block.compile(backend=backend, fullgraph=True, dynamic=False)
    return model


def apply_compile_whole(model: nn.Module, *, backend: str = "inductor") -> nn.Module:
    """Compile ``model``'s forward as one graph, in place (parameter names and state dict unchanged)."""
    model.compile(backend=backend, dynamic=False)
    return model
