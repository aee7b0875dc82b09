"""``--mesh auto``: the layouts worth measuring, their estimated cost, and the one estimate-only choice.

Every factorisation ``pp × dp_replicate × dp_shard × cp × ep × tp`` of the
world size is checked against the model (heads divisible by tp, layers ≥
stages, batch divisible by data-parallel size, sequence by ``2 × cp``,
experts by ep, ep only for a mixture of experts), its per-device memory is
estimated (fp32 weights, gradients and AdamW moments sharded by FSDP/TP/PP,
experts also by EP; activations after Korthikanti et al. 2022, divided by cp,
with full activation checkpointing when that is what it takes to fit) and its
energy per token is estimated from a simple roofline step-time model: compute
at a fixed efficiency, exposed communication (TP all-reduces, the context-
parallel K/V all-gather, the expert all-to-alls, FSDP gathers, DDP
all-reduce) and pipeline bubbles, with busy devices at active power and
waiting ones at idle power. The numbers rank layouts; they are estimates, not
measurements: ``autolayout.py`` measures the best of them and chooses by what
it measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.errors import ConfigError
from greentrain.runtime.model import count_params, expert_params

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
    cp: int = 1
    ep: int = 1

    def describe(self) -> str:
        extra = "".join(f" {name}={size}" for name, size in (("cp", self.cp), ("ep", self.ep)) if size > 1)
        return (f"pp={self.pp} dp_replicate={self.dp_replicate} dp_shard={self.dp_shard}{extra} tp={self.tp} "
                f"ac={self.ac}")

    def parallel(self) -> dict[str, int]:
        """The ``[parallel]`` sizes of this layout."""
        return {"pp": self.pp, "dp_replicate": self.dp_replicate, "dp_shard": self.dp_shard, "cp": self.cp,
                "ep": self.ep, "tp": self.tp}


@dataclass(frozen=True, slots=True)
class MeshPlan:
    """The chosen layout, the others that fit, and why."""

    best: LayoutEstimate
    candidates: tuple[LayoutEstimate, ...]
    rejected: tuple[str, ...]
    reason: str
    memory_gb: float = 0.0
    """The per-device memory the plan fitted the layouts into."""
    trials: tuple = ()
    """What each measured layout drew (``autolayout.Trial``, lowest energy per token first); empty when the
    choice is the estimate's alone."""


Layout = tuple[int, int, int, int, int, int]
"""(pp, dp_replicate, dp_shard, cp, ep, tp)."""


def _factorisations(world: int) -> list[Layout]:
    divisors = [d for d in range(1, world + 1) if world % d == 0]
    out = []
    for pp in divisors:
        for tp in divisors:
            for rep in divisors:
                for cp in divisors:
                    for ep in divisors:
                        fixed = pp * tp * rep * cp * ep
                        if world % fixed == 0:
                            out.append((pp, rep, world // fixed, cp, ep, tp))
    return out


def _describe(layout: Layout) -> str:
    pp, rep, shard, cp, ep, tp = layout
    return LayoutEstimate(pp, rep, shard, tp, "", 0.0, 0.0, 0.0, cp, ep).describe().removesuffix(" ac=")


def _invalid(model, layout: Layout, seq_len: int, global_batch: int, hw: Hardware) -> str | None:
    pp, rep, shard, cp, ep, tp = layout
    dp = rep * shard * ep
    if model.n_heads % tp or model.kv_heads % tp:
        return f"tp={tp} does not divide the {model.n_heads} heads / {model.kv_heads} kv heads"
    if tp > hw.gpus_per_node:
        return f"tp={tp} spans nodes (more than {hw.gpus_per_node} devices per node)"
    if pp > model.n_layers:
        return f"pp={pp} exceeds {model.n_layers} layers"
    if seq_len % (2 * cp):
        return f"cp={cp}: the sequence of {seq_len} does not split into 2 x cp = {2 * cp} chunks"
    if ep > 1 and not model.moe:
        return f"ep={ep}: a dense model has no experts to spread"
    if model.moe and model.n_experts % ep:
        return f"ep={ep} does not divide the {model.n_experts} experts"
    if global_batch % dp:
        return f"global batch {global_batch} does not divide by dp={dp}"
    if pp > 1 and (global_batch // dp) % pp:
        return f"pp={pp}: the per-rank batch of {global_batch // dp} does not split into {pp} microbatches"
    return None


@dataclass(frozen=True, slots=True)
class _Params:
    """The model's parameters by how the layout divides them."""

    tp_split: int
    """Attention, embeddings, dense SwiGLUs: divided by tp."""
    replicated: int
    """MoE routers and shared experts: replicated over tp (a MoE block runs whole on every tp rank)."""
    experts: int
    """Routed experts: divided by ep."""
    active: int
    """What one token uses (of the routed experts only top_k)."""


def _params(model) -> _Params:
    experts = expert_params(model)
    replicated = (model.n_layers * (model.dim * model.n_experts + 3 * model.dim * model.moe_hidden
                                    * int(model.shared_expert)) if model.moe else 0)
    return _Params(count_params(model) - experts - replicated, replicated, experts,
                   count_params(model, active=True))


def _comm_s(model, layout: Layout, tokens_per_rank: float, params: _Params, hw: Hardware) -> tuple[float, float]:
    """(exposed time: TP, CP and EP collectives; FSDP + DDP time before overlap) per step, seconds."""
    pp, rep, shard, cp, ep, tp = layout
    intra, inter = hw.intra_bw_gbps * 1e9, hw.inter_bw_gbps * 1e9
    layers = model.n_layers / pp
    act = tokens_per_rank * model.dim * hw.bytes_per_value
    # TP: 4 all-reduce-sized collectives of the activations per block (2 forward, 2 backward).
    tp_s = 0.0 if tp == 1 else 8 * layers * act * (tp - 1) / tp / intra
    # CP: K/V all-gathered forward, their gradients reduce-scattered backward, per block.
    kv = tokens_per_rank * 2 * model.kv_heads * (model.dim // model.n_heads) * hw.bytes_per_value / tp
    cp_bw = intra if cp * ep * tp <= hw.gpus_per_node else inter
    cp_s = 0.0 if cp == 1 else 2 * layers * kv * (cp - 1) / cp_bw
    # EP: dispatch and combine all-to-alls, forward and backward, of top_k copies of each token.
    ep_bw = intra if ep * tp <= hw.gpus_per_node else inter
    ep_s = 0.0 if ep == 1 else 4 * layers * act * model.top_k * (ep - 1) / ep / ep_bw
    fsdp_ways, expert_ways = shard * cp * ep, shard * cp
    dense_local = (params.tp_split / tp + params.replicated) / pp
    fsdp_s = 3 * hw.bytes_per_value * (dense_local * (fsdp_ways - 1) / fsdp_ways
                                       + params.experts / (pp * ep) * (expert_ways - 1) / expert_ways) / intra
    rep_bw = inter if shard * cp * ep * tp * pp >= hw.gpus_per_node else intra
    ddp_s = 0.0 if rep == 1 else 2 * 4 * (dense_local / fsdp_ways + params.experts / (pp * ep * expert_ways)) \
        * (rep - 1) / rep / rep_bw
    return tp_s + cp_s + ep_s, fsdp_s + ddp_s


def _activation_bytes(model, seq_len: int, micro: int, layout: Layout) -> float:
    """Korthikanti et al.: ~s·b·d·(34 + 5·a·s/d) bytes per layer (attention ~15 of the 34, the SwiGLU ~19),
    tokens divided by cp, the TP-split parts by tp; a MoE block's SwiGLU part scales with what a token uses."""
    _pp, _rep, _shard, cp, _ep, tp = layout
    tokens = seq_len / cp * micro
    attn = tokens * model.dim * (15 + 5 * model.n_heads * seq_len / model.dim) / tp
    if model.moe:
        mlp = tokens * model.dim * 19 * model.moe_hidden * (model.top_k + model.shared_expert) / (4 * model.dim)
    else:
        mlp = tokens * model.dim * 19 / tp
    return attn + mlp


def _estimate(model, layout: Layout, seq_len: int, global_batch: int, hw: Hardware) -> list[LayoutEstimate]:
    pp, rep, shard, cp, ep, tp = layout
    params = _params(model)
    dp = rep * shard * ep
    local_batch = global_batch // dp
    microbatches = max(pp, 1) if local_batch >= pp else 1
    micro = max(1, local_batch // microbatches)
    layers = model.n_layers / pp
    fsdp_ways = shard * cp * ep
    state_gb = 16 * ((params.tp_split / tp + params.replicated) / (pp * fsdp_ways)
                     + params.experts / (pp * ep * shard * cp)) / 1e9
    act_layer = _activation_bytes(model, seq_len, micro, layout)
    in_flight = min(microbatches, pp)  # 1F1B keeps at most pp microbatches alive on the first stage
    tokens = global_batch * seq_len
    # Per rank: its tokens (dp x cp ways) through its layers (pp); TP splits all but a MoE block's experts.
    # FLOPs per token: 6 x the matmul parameters a token uses (not the embedding lookup); a MoE block's
    # router, shared and top-k experts run whole on every tp rank.
    matmul = 6 * (params.tp_split - model.vocab_size * model.dim) / tp + 6 * (params.active - params.tp_split)
    attn_flops = 12 * model.n_layers * model.dim * seq_len / tp
    flops_rank = tokens / (dp * cp) * (matmul + attn_flops) / pp
    exposed_s, dp_s = _comm_s(model, layout, tokens / (dp * cp), params, hw)
    for ac, recompute, act_bytes in (("none", 1.0, act_layer),
                                     ("full", 4 / 3, seq_len / cp * micro * model.dim * 2)):
        memory_gb = state_gb + act_bytes * layers * in_flight / 1e9
        if memory_gb > 0.85 * hw.memory_gb:
            continue
        compute = flops_rank * recompute / (hw.peak_flops * hw.efficiency)
        busy = compute + exposed_s + 0.3 * dp_s  # FSDP/DDP traffic mostly overlaps compute
        bubble = busy * (pp - 1) / microbatches if pp > 1 else 0.0
        energy = pp * dp * cp * tp * (hw.active_power_w * busy + hw.idle_power_w * bubble)
        return [LayoutEstimate(pp, rep, shard, tp, ac, memory_gb, busy + bubble, energy / tokens, cp, ep)]
    return []  # does not fit, even with full activation checkpointing


def plan_mesh(model, *, world_size: int, seq_len: int, global_batch: int,
              hardware: Hardware | None = None) -> MeshPlan:
    """Choose ``pp/dp_replicate/dp_shard/tp`` for ``world_size`` devices (lowest energy per token that fits)."""
    hw = hardware or Hardware()
    candidates: list[LayoutEstimate] = []
    rejected: list[str] = []
    for layout in _factorisations(world_size):
        why = _invalid(model, layout, seq_len, global_batch, hw)
        if why:
            rejected.append(why)
            continue
        est = _estimate(model, layout, seq_len, global_batch, hw)
        if not est:
            rejected.append(f"{_describe(layout)} does not fit in {hw.memory_gb:g} GB even with full "
                            "activation checkpointing")
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
    return MeshPlan(best, tuple(candidates), tuple(rejected), reason, hw.memory_gb)


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
    return apply_layout(cfg, best), plan


def apply_layout(cfg, layout: LayoutEstimate):
    """A copy of ``cfg`` with ``layout``'s sizes (1F1B with one microbatch per stage; its AC when needed)."""
    local_batch = cfg.train.global_batch // (layout.dp_replicate * layout.dp_shard * layout.ep) // cfg.train.grad_accum
    microbatches = layout.pp if layout.pp > 1 and local_batch % layout.pp == 0 else None
    cfg = cfg.replace("parallel", mesh="manual", **layout.parallel(), pp_schedule="1f1b",
                      microbatches=microbatches if layout.pp > 1 else None)
    if layout.ac != "none" and cfg.train.ac == "none":
        cfg = cfg.replace("train", ac=layout.ac)
    return cfg
