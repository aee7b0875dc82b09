"""``--mesh auto``: pick a valid layout and say why.

Every factorisation ``pp × dp_replicate × dp_shard × tp`` of the world size is
checked against the model (heads divisible by tp, layers ≥ stages, batch
divisible by data-parallel size), its per-device memory is estimated (fp32
weights, gradients and AdamW moments sharded by FSDP/TP/PP; activations after
Korthikanti et al. 2022, with full activation checkpointing when that is what
it takes to fit) and its energy per token is estimated from a simple roofline
step-time model: compute at a fixed efficiency, exposed communication (TP
all-reduces, FSDP gathers, DDP all-reduce) and pipeline bubbles, with busy
devices at active power and waiting ones at idle power. The fitting layout
with the lowest energy per token wins. The numbers rank layouts; they are
estimates, not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.errors import ConfigError
from greentrain.runtime.model import count_params

__all__ = ["Hardware", "LayoutEstimate", "MeshPlan", "plan_mesh", "detect_hardware", "resolve_auto_mesh",
           "choose_reshard_after_forward"]


def choose_reshard_after_forward(pp_enabled: bool) -> bool:
    """FSDP2's ``reshard_after_forward`` when the config leaves it open.

    Without pipelining: reshard (ZeRO-3); the backward all-gather it costs is
    prefetched behind the previous block's compute, and the memory it frees is
    what lets large models fit. With pipelining every stage runs its forward
    once per microbatch: resharding would gather the same parameters again for
    each of them, so they are kept (ZeRO-2) for the step.
    """
    return not pp_enabled


@dataclass(frozen=True, slots=True, kw_only=True)
class Hardware:
    """Per-device figures the estimate needs (defaults: an H100-class GPU on NVLink)."""

    memory_gb: float = 80.0
    peak_flops: float = 989e12
    efficiency: float = 0.4
    """Fraction of peak the matmuls reach."""
    intra_bw_gbps: float = 300.0
    """Per-device bandwidth inside a node (GB/s) for TP/FSDP collectives."""
    inter_bw_gbps: float = 25.0
    """Per-device bandwidth across nodes (GB/s) for replica all-reduce and pipeline sends."""
    gpus_per_node: int = 8
    active_power_w: float = 700.0
    idle_power_w: float = 100.0
    bytes_per_value: int = 2
    """Activation/communication precision (2 for bf16)."""


@dataclass(frozen=True, slots=True)
class LayoutEstimate:
    """One candidate layout and its estimated cost."""

    pp: int
    dp_replicate: int
    dp_shard: int
    tp: int
    ac: str
    memory_gb: float
    step_time_s: float
    energy_per_token_j: float

    def describe(self) -> str:
        return f"pp={self.pp} dp_replicate={self.dp_replicate} dp_shard={self.dp_shard} tp={self.tp} ac={self.ac}"


@dataclass(frozen=True, slots=True)
class MeshPlan:
    """The chosen layout, the others that fit, and why."""

    best: LayoutEstimate
    candidates: tuple[LayoutEstimate, ...]
    rejected: tuple[str, ...]
    reason: str


def _factorisations(world: int) -> list[tuple[int, int, int, int]]:
    divisors = [d for d in range(1, world + 1) if world % d == 0]
    out = []
    for pp in divisors:
        for tp in divisors:
            for rep in divisors:
                if world % (pp * tp * rep) == 0:
                    out.append((pp, rep, world // (pp * tp * rep), tp))
    return out


def _invalid(model, layout, global_batch: int, hw: Hardware) -> str | None:
    pp, rep, shard, tp = layout
    if model.n_heads % tp or model.kv_heads % tp:
        return f"tp={tp} does not divide the {model.n_heads} heads / {model.kv_heads} kv heads"
    if tp > hw.gpus_per_node:
        return f"tp={tp} spans nodes (more than {hw.gpus_per_node} devices per node)"
    if pp > model.n_layers:
        return f"pp={pp} exceeds {model.n_layers} layers"
    if global_batch % (rep * shard):
        return f"global batch {global_batch} does not divide by dp={rep * shard}"
    if pp > 1 and (global_batch // (rep * shard)) % pp:
        return f"pp={pp}: the per-rank batch of {global_batch // (rep * shard)} does not split into {pp} microbatches"
    return None


def _comm_s(model, layout, tokens_per_rank: float, n_params: int, hw: Hardware) -> tuple[float, float]:
    """(exposed TP time, FSDP + DDP time before overlap) per step, seconds."""
    pp, rep, shard, tp = layout
    intra, inter = hw.intra_bw_gbps * 1e9, hw.inter_bw_gbps * 1e9
    layers = model.n_layers / pp
    # TP: 4 all-reduce-sized collectives of the activations per block (2 forward, 2 backward).
    tp_s = 0.0 if tp == 1 else 8 * layers * tokens_per_rank * model.dim * hw.bytes_per_value * (tp - 1) / tp / intra
    # FSDP: all-gather forward, all-gather backward, reduce-scatter gradients.
    fsdp_s = 0.0 if shard == 1 else 3 * n_params / (tp * pp) * hw.bytes_per_value * (shard - 1) / shard / intra
    rep_bw = inter if shard * tp * pp >= hw.gpus_per_node else intra
    ddp_s = 0.0 if rep == 1 else 2 * 4 * n_params / (tp * pp * shard) * (rep - 1) / rep / rep_bw
    return tp_s, fsdp_s + ddp_s


def _estimate(model, layout, seq_len: int, global_batch: int, hw: Hardware) -> list[LayoutEstimate]:
    pp, rep, shard, tp = layout
    n_params = count_params(model)
    dp = rep * shard
    local_batch = global_batch // dp
    microbatches = max(pp, 1) if local_batch >= pp else 1
    micro = max(1, local_batch // microbatches)
    layers = model.n_layers / pp
    state_gb = 16 * n_params / (tp * pp * shard) / 1e9
    # Korthikanti et al.: bytes per layer ~ s·b·d·(34 + 5·a·s/d), divided by tp with sequence parallel.
    act_layer = seq_len * micro * model.dim * (34 + 5 * model.n_heads * seq_len / model.dim) / tp
    in_flight = min(microbatches, pp)  # 1F1B keeps at most pp microbatches alive on the first stage
    tokens = global_batch * seq_len
    flops = 6 * n_params * tokens + 12 * model.n_layers * model.dim * seq_len * tokens
    tp_s, dp_s = _comm_s(model, layout, tokens / dp, n_params, hw)
    for ac, recompute, act_bytes in (("none", 1.0, act_layer), ("full", 4 / 3, seq_len * micro * model.dim * 2)):
        memory_gb = state_gb + act_bytes * layers * in_flight / 1e9
        if memory_gb > 0.85 * hw.memory_gb:
            continue
        compute = flops * recompute / (pp * tp * dp * hw.peak_flops * hw.efficiency)
        busy = compute + tp_s + 0.3 * dp_s  # FSDP/DDP traffic mostly overlaps compute
        bubble = busy * (pp - 1) / microbatches if pp > 1 else 0.0
        energy = pp * dp * tp * (hw.active_power_w * busy + hw.idle_power_w * bubble)
        return [LayoutEstimate(pp, rep, shard, tp, ac, memory_gb, busy + bubble, energy / tokens)]
    return []  # does not fit, even with full activation checkpointing


def plan_mesh(model, *, world_size: int, seq_len: int, global_batch: int,
              hardware: Hardware | None = None) -> MeshPlan:
    """Choose ``pp/dp_replicate/dp_shard/tp`` for ``world_size`` devices (lowest energy per token that fits)."""
    hw = hardware or Hardware()
    candidates: list[LayoutEstimate] = []
    rejected: list[str] = []
    for layout in _factorisations(world_size):
        why = _invalid(model, layout, global_batch, hw)
        if why:
            rejected.append(why)
            continue
        est = _estimate(model, layout, seq_len, global_batch, hw)
        if not est:
            pp, rep, shard, tp = layout
            rejected.append(f"pp={pp} dp_replicate={rep} dp_shard={shard} tp={tp} does not fit in "
                            f"{hw.memory_gb:g} GB even with full activation checkpointing")
        candidates.extend(est)
    if not candidates:
        raise ConfigError(f"--mesh auto: no layout of {world_size} devices fits this model "
                          f"({count_params(model) / 1e6:.0f}M parameters, {hw.memory_gb:g} GB per device); "
                          "use more devices, a smaller model, batch or sequence")
    candidates.sort(key=lambda c: (c.energy_per_token_j, c.memory_gb))
    best = candidates[0]
    runner_up = (f"; next best {candidates[1].describe()} at {candidates[1].energy_per_token_j * 1e3:.3g} mJ/token"
                 if len(candidates) > 1 else "")
    reason = (f"{best.describe()}: fits ({best.memory_gb:.1f} of {hw.memory_gb:.3g} GB per device) with the lowest "
              f"estimated energy per token, {best.energy_per_token_j * 1e3:.3g} mJ, of {len(candidates)} valid "
              f"layouts{runner_up}; {len(rejected)} rejected")
    return MeshPlan(best, tuple(candidates), tuple(rejected), reason)


def detect_hardware(device_type: str, precision: str, memory_gb: float | None = None,
                    local_world: int = 1) -> Hardware:
    """Hardware figures for this machine: CUDA properties when present, else a CPU share."""
    import os

    import torch

    from greentrain.runtime.metrics import peak_flops

    if device_type == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return Hardware(memory_gb=memory_gb or props.total_memory / 1e9,
                        peak_flops=peak_flops(props.name, precision) or Hardware().peak_flops)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    # CPU ranks share one host: its memory and roughly 50 GFLOP/s per core.
    return Hardware(memory_gb=memory_gb or total / local_world, peak_flops=5e10, efficiency=0.5,
                    intra_bw_gbps=5.0, inter_bw_gbps=1.0, active_power_w=15.0, idle_power_w=5.0,
                    bytes_per_value=4)


def resolve_auto_mesh(cfg, world_size: int, device_type: str):
    """For ``parallel.mesh = "auto"``: a copy of ``cfg`` with the planned sizes, and the MeshPlan (else cfg, None)."""
    if cfg.parallel.mesh != "auto":
        return cfg, None
    local_world = int(__import__("os").environ.get("LOCAL_WORLD_SIZE", world_size))
    hw = detect_hardware(device_type, cfg.train.dtype, cfg.parallel.device_memory_gb, local_world)
    plan = plan_mesh(cfg.model, world_size=world_size, seq_len=cfg.train.seq_len,
                     global_batch=cfg.train.global_batch // cfg.train.grad_accum, hardware=hw)
    best = plan.best
    local_batch = cfg.train.global_batch // (best.dp_replicate * best.dp_shard) // cfg.train.grad_accum
    microbatches = best.pp if best.pp > 1 and local_batch % best.pp == 0 else None
    cfg = cfg.replace("parallel", mesh="manual", pp=best.pp, dp_replicate=best.dp_replicate,
                      dp_shard=best.dp_shard, tp=best.tp, pp_schedule="1f1b",
                      microbatches=microbatches if best.pp > 1 else None)
    if best.ac != "none" and cfg.train.ac == "none":
        cfg = cfg.replace("train", ac=best.ac)
    return cfg, plan
