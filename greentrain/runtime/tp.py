"""Tensor parallelism with DTensor: ``apply_tp``.

Attention and SwiGLU projections are split Megatron-style (column-wise in,
row-wise out) so each block needs one all-reduce (or, with sequence
parallelism, one all-gather and one reduce-scatter) per direction. A MoE
block is replicated over tp (its experts are split by ``ep`` instead). With
sequence parallelism the norms and the residual stream are sharded along the
sequence. With loss parallelism the logits stay sharded over the vocabulary and
cross-entropy runs on the shards (``loss_parallel()`` context).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from greentrain.runtime.model import Transformer

__all__ = ["apply_tp", "SyncRowwiseParallel"]


class SyncRowwiseParallel(RowwiseParallel):
    """RowwiseParallel whose output redistribute completes before returning.

    The stock style redistributes asynchronously. When the consumer is a
    compiled block under FSDP2, the pending collective is not waited on inside
    the graph and the embedding gradient silently comes back as zeros; waiting
    here costs one synchronisation point per step.
    """

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):  # type: ignore[override]
        if outputs.placements != output_layouts:
            outputs = outputs.redistribute(placements=output_layouts, async_op=False)
        return outputs.to_local() if use_local_output else outputs


def _block_plan(sequence_parallel: bool, moe: bool) -> dict[str, ParallelStyle]:
    residual = Shard(1) if sequence_parallel else Replicate()
    plan: dict[str, ParallelStyle] = {
        "attention": PrepareModuleInput(input_layouts=(residual, None), desired_input_layouts=(Replicate(), None)),
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=residual),
    }
    if moe:
        # The MoE block is replicated over tp: every tp rank routes the whole (local) sequence and
        # runs the same experts (split over ep, not tp); under sequence parallelism its input is
        # gathered and its output cut back to this rank's slice of the sequence.
        if sequence_parallel:
            plan["moe"] = PrepareModuleInputOutput(
                input_layouts=(residual,), desired_input_layouts=(Replicate(),), use_local_input=True,
                output_layouts=(Replicate(),), desired_output_layouts=(residual,), use_local_output=True)
    else:
        plan.update({
            "feed_forward": PrepareModuleInput(input_layouts=(residual,), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=residual),
            "feed_forward.w3": ColwiseParallel(),
        })
    if sequence_parallel:
        plan["attention_norm"] = SequenceParallel()
        plan["ffn_norm"] = SequenceParallel()
    return plan


def apply_tp(model: Transformer, tp_mesh: DeviceMesh, *, sequence_parallel: bool = True, loss_parallel: bool = True,
             n_heads: int | None = None, n_kv_heads: int | None = None) -> Transformer:
    """Shard ``model`` (a Transformer or a pipeline stage of one) over the 1-D ``tp_mesh`` in place."""
    tp = tp_mesh.size()
    for name, heads in (("model.n_heads", n_heads), ("model.n_kv_heads", n_kv_heads)):
        if heads is not None and heads % tp:
            from greentrain.errors import ConfigError

            raise ConfigError(f"{name}={heads} must divide by --tp {tp}")
    residual = Shard(1) if sequence_parallel else Replicate()
    top: dict[str, ParallelStyle] = {}
    if model.tok_embeddings is not None:
        top["tok_embeddings"] = SyncRowwiseParallel(input_layouts=Replicate(), output_layouts=residual)
    if model.norm is not None and sequence_parallel:
        top["norm"] = SequenceParallel()
    if model.output is not None:
        top["output"] = ColwiseParallel(
            input_layouts=residual,
            output_layouts=Shard(-1) if loss_parallel else Replicate(),
            use_local_output=not loss_parallel,
        )
    if top:
        parallelize_module(model, tp_mesh, top)
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, _block_plan(sequence_parallel, getattr(block, "moe_enabled", False)))
    return model
