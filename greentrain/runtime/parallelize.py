"""Apply the parallelisms to a (meta-device) model in the fixed order TP → CP → EP → AC → compile → FSDP.

On a mesh of one (no TP, FSDP or pipeline) the model stays a plain module:
no DTensor, no FSDP hooks, and ``compile`` takes the whole model as one graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from greentrain.runtime.ac import apply_ac
from greentrain.runtime.compiling import apply_compile, apply_compile_whole
from greentrain.runtime.config import JobConfig
from greentrain.runtime.cp import apply_cp
from greentrain.runtime.ep import apply_ep
from greentrain.runtime.fsdp import apply_fsdp
from greentrain.runtime.parallel_dims import ParallelDims
from greentrain.runtime.mesh_planner import choose_reshard_after_forward
from greentrain.runtime.tp import apply_tp

if TYPE_CHECKING:
    from greentrain.runtime.model import Transformer

__all__ = ["parallelize"]


def parallelize(model: Transformer, dims: ParallelDims, cfg: JobConfig) -> Transformer:
    """Parallelize ``model`` (a Transformer or one pipeline stage of it) in place and return it."""
    par, train = cfg.parallel, cfg.train
    if dims.tp_enabled:
        apply_tp(model, dims.mesh["tp"], sequence_parallel=par.sequence_parallel,
                 loss_parallel=par.loss_parallel, n_heads=cfg.model.n_heads, n_kv_heads=cfg.model.kv_heads)
    if dims.cp_enabled:
        apply_cp(model, dims.mesh["cp"])
    if dims.ep_enabled:
        apply_ep(model, dims.mesh["ep"])
    apply_ac(model, train.ac, every=train.ac_every)
    if train.compile and not dims.distributed:
        apply_compile_whole(model, backend=train.compile_backend)
    elif train.compile:
        apply_compile(model, backend=train.compile_backend)  # per block, before fully_shard
    if dims.dp_enabled:
        reshard = par.reshard_after_forward
        if reshard is None:
            reshard = choose_reshard_after_forward(dims.pp_enabled)
        apply_fsdp(model, dims.fsdp_mesh(), precision=train.dtype, reshard_after_forward=reshard,
                   cpu_offload=par.cpu_offload, expert_mesh=dims.expert_fsdp_mesh() if dims.ep_enabled else None)
    return model
