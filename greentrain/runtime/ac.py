"""Activation checkpointing: ``apply_ac``.

``full`` recomputes every block in backward (activation memory ~ one block);
``selective-layer`` does it for every N-th block; ``selective-op`` keeps the
outputs of matmuls and attention (expensive to recompute) and recomputes the
cheap element-wise ops of every block.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

if TYPE_CHECKING:
    from greentrain.runtime.model import Transformer

__all__ = ["apply_ac", "SAVE_OPS"]

# Outputs worth keeping: recomputing them costs FLOPs (or a collective).
SAVE_OPS = {
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
}


def _op_policy_context():
    counts: dict[str, int] = defaultdict(int)

    def policy(ctx, op, *args, **kwargs):
        # Per-side counters keep forward and recompute decisions aligned.
        key = "recompute" if ctx.is_recompute else "forward"
        if op == torch.ops.aten.mm.default:
            counts[key] += 1
            # Save every other matmul: halves matmul memory, recomputes half.
            return CheckpointPolicy.MUST_SAVE if counts[key] % 2 else CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE if op in SAVE_OPS else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def apply_ac(model: Transformer, mode: str, *, every: int = 2) -> Transformer:
    """Wrap the blocks of ``model`` in place: mode ``none|full|selective-op|selective-layer``."""
    if mode == "none":
        return model
    if mode not in ("full", "selective-op", "selective-layer"):
        from greentrain.errors import ConfigError

        raise ConfigError(f"train.ac: {mode!r} is not none, full, selective-op or selective-layer")
    for key, block in list(model.layers.items()):
        if mode == "selective-layer" and int(key) % every:
            continue
        if mode == "selective-op":
            wrapped = checkpoint_wrapper(block, context_fn=_op_policy_context, preserve_rng_state=False)
        else:
            wrapped = checkpoint_wrapper(block, preserve_rng_state=False)
        model.layers[key] = wrapped
    return model
