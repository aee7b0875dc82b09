"""Fully sharded data parallelism (FSDP2 ``fully_shard``): ``apply_fsdp``.

Each transformer block is its own FSDP unit (its parameters are all-gathered
just before it runs and freed after, when ``reshard_after_forward``); the
embeddings, final norm and output form the root unit. A 2-D mesh
(``dp_replicate × dp_shard``) gives HSDP: shard within a group, all-reduce
across groups; with a shard size of 1 that is plain DDP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Shard
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard

from greentrain.runtime.moe import block_moe

if TYPE_CHECKING:
    from greentrain.runtime.model import Transformer

__all__ = ["apply_fsdp", "DTYPES", "set_fsdp_precision", "fsdp_modules"]

DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "tf32": torch.float32,
                                  "bf16": torch.bfloat16, "fp16": torch.float16}


def _mp_policy(precision: str) -> MixedPrecisionPolicy:
    # Gradients are reduced in fp32 whatever the compute dtype: sums of many
    # low-precision shards lose too much.
    return MixedPrecisionPolicy(param_dtype=DTYPES[precision], reduce_dtype=torch.float32)


def _expert_placement(expert_mesh: DeviceMesh) -> Callable[[nn.Parameter], Shard]:
    """Shard expert weights on the expert dimension when it splits evenly, else on the next one."""
    size = expert_mesh.size(expert_mesh.ndim - 1)  # the shard dimension (HSDP: the second)

    def place(param: nn.Parameter) -> Shard:
        rows = param.to_local().shape[0] if hasattr(param, "to_local") else param.shape[0]
        return Shard(0) if rows % size == 0 else Shard(1)

    return place


def apply_fsdp(model: Transformer, dp_mesh: DeviceMesh, *, precision: str = "fp32", reshard_after_forward: bool = True,
               cpu_offload: bool = False, expert_mesh: DeviceMesh | None = None) -> Transformer:
    """Shard ``model`` in place over ``dp_mesh`` (1-D: FSDP; 2-D: HSDP) and return it.

    With ``expert_mesh`` (expert parallelism), each MoE block's routed experts, already split over ``ep``,
    are their own unit sharded over that mesh.
    """
    # pin_memory needs an accelerator; on a CPU-only host pinning raises.
    offload = CPUOffloadPolicy(pin_memory=torch.cuda.is_available()) if cpu_offload else OffloadPolicy()
    mp_policy = _mp_policy(precision)
    blocks = list(model.layers.values())
    sharded: list[FSDPModule] = []
    for i, block in enumerate(blocks):
        # The last block's parameters are needed again first in backward: keep them.
        reshard = reshard_after_forward and i < len(blocks) - 1
        if expert_mesh is not None and getattr(block, "moe_enabled", False):
            fully_shard(block_moe(block).experts, mesh=expert_mesh, reshard_after_forward=reshard,
                        shard_placement_fn=_expert_placement(expert_mesh), mp_policy=mp_policy,
                        offload_policy=offload)
        sharded.append(fully_shard(block, mesh=dp_mesh, reshard_after_forward=reshard, mp_policy=mp_policy,
                                   offload_policy=offload))
    fully_shard(model, mesh=dp_mesh, reshard_after_forward=reshard_after_forward, mp_policy=mp_policy,
                offload_policy=offload)
    _prefetch(sharded)
    return model


def _prefetch(blocks: list[FSDPModule]) -> None:
    """Issue each block's all-gather when its neighbour starts (forward: the next, backward: the previous).

    FSDP2's implicit prefetch issues an all-gather only once the host reaches that block; explicit
    prefetch overlaps it with the current block's compute even when the host does not run ahead.
    """
    for current, following in zip(blocks, blocks[1:]):
        current.set_modules_to_forward_prefetch([following])
        following.set_modules_to_backward_prefetch([current])


def fsdp_modules(model: nn.Module) -> list[FSDPModule]:
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def set_fsdp_precision(model: nn.Module, precision: str) -> int:
    """Switch the compute dtype of every FSDP unit in ``model`` between steps; returns units changed.

    FSDP2 reads its dtypes from the parameter group at each all-gather, so
    re-deriving them from a new policy takes effect at the next forward. The
    all-gather buffers and unsharded views were allocated in the old dtype: drop
    them (between steps every unit is resharded) so the next all-gather
    allocates them again.
    """
    changed = 0
    policy = _mp_policy(precision)
    for module in fsdp_modules(model):
        state = module._get_fsdp_state()
        state._mp_policy = policy  # the forward-input cast reads the state's copy
        group = state._fsdp_param_group
        if group is None:
            continue
        group.mp_policy = policy
        group._init_mp_dtypes()
        for fsdp_param in group.fsdp_params:
            fsdp_param.all_gather_outputs = []
            if hasattr(fsdp_param, "_unsharded_param"):
                del fsdp_param._unsharded_param
        changed += 1
    return changed
