"""Per-block ``torch.compile``: ``apply_compile``.

Compiling each block separately (rather than the whole model) keeps graph
breaks at FSDP/pipeline boundaries out of the compiled region and lets all
blocks share one compiled graph (parameters are graph inputs).
"""

from __future__ import annotations

from torch import nn

__all__ = ["apply_compile"]


def apply_compile(model: nn.Module, *, backend: str = "inductor") -> nn.Module:
    """Compile every transformer block of ``model`` in place (full graph, no dynamic shapes)."""
    for block in model.layers.values():
        block.compile(backend=backend, fullgraph=True, dynamic=False)
    return model
