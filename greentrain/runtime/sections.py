"""The sections of a training configuration: one small dataclass per component.

A config file has the sections ``[model]``, ``[parallel]``, ``[train]``,
``[data]``, ``[checkpoint]``, ``[metrics]`` and ``[greentrain]``; every key is a
field below (its docstring is the documentation). ``greentrain.runtime.config``
loads and checks a whole file into a ``JobConfig`` of these.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, make_dataclass
from typing import Literal, cast, get_args

from greentrain.runtime.checks import (
    MAX_COUNT,
    MAX_EXPERTS,
    MAX_DIM,
    MAX_PARAMS,
    MAX_SEQ_LEN,
    MAX_STEPS,
    MAX_VOCAB,
    Checks,
    InvalidConfig,
)
from greentrain.runtime.greentrain_section import GreentrainSection

__all__ = [
    "ModelConfig",
    "ParallelConfig",
    "TrainConfig",
    "DataConfig",
    "CheckpointConfig",
    "MetricsConfig",
    "GreentrainConfig",
    "InvalidConfig",
    "SECTIONS",
    "PRECISIONS",
    "PP_SCHEDULES",
    "AC_MODES",
    "JOB_OPTION_FIELDS",
    "RUNTIME_DEFAULTS",
]

Precision = Literal["fp32", "bf16", "fp16", "tf32"]
PpSchedule = Literal["gpipe", "1f1b", "interleaved"]
AcMode = Literal["none", "full", "selective-op", "selective-layer"]
TrainDevice = Literal["auto", "cpu", "cuda"]
MeshMode = Literal["manual", "auto"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
PP_SCHEDULES: tuple[str, ...] = get_args(PpSchedule)
AC_MODES: tuple[str, ...] = get_args(AcMode)


@dataclass(kw_only=True, slots=True)
class ModelConfig:
    """The reference decoder-only transformer (RMSNorm, RoPE, SwiGLU)."""

    dim: int = 64
    """Hidden size (model width)."""
    n_layers: int = 4
    """Number of transformer blocks."""
    n_heads: int = 4
    """Attention heads; ``dim`` must divide by it."""
    n_kv_heads: int | None = None
    """Key/value heads for grouped-query attention (unset: ``n_heads``; 0 is an error)."""
    vocab_size: int = 256
    """Vocabulary size; 256 for the byte-level data pipeline."""
    ffn_multiple_of: int = 32
    """SwiGLU hidden size is rounded up to a multiple of this."""
    ffn_dim_multiplier: float | None = None
    """Optional scale of the SwiGLU hidden size (Llama style)."""
    norm_eps: float = 1e-5
    """RMSNorm epsilon."""
    rope_theta: float = 10000.0
    """RoPE base frequency."""
    max_seq_len: int = 2048
    """Longest sequence RoPE tables are built for."""
    n_experts: int = 0
    """Mixture of experts: routed experts per block (0: a dense model, every block a SwiGLU)."""
    top_k: int = 2
    """MoE: experts each token is routed to."""
    expert_hidden: int | None = None
    """MoE: hidden size of each expert's SwiGLU (unset: the dense ``ffn_hidden``)."""
    shared_expert: bool = False
    """MoE: add one always-on expert (a SwiGLU of ``expert_hidden``) that every token passes through."""
    aux_loss_coef: float = 0.01
    """MoE: weight of the load-balancing loss (per sequence, summed over MoE blocks) in the objective."""
    capacity_factor: float | None = None
    """MoE: unset = dropless (every token reaches its top-k experts); else each expert takes at most
    ``capacity_factor × tokens × top_k / n_experts`` tokens of a batch and drops the rest (their residual
    passes through)."""

    def __post_init__(self) -> None:
        c = Checks("model", self)
        sizes_ok = all([c.int_range("dim", 1, MAX_DIM), c.int_range("n_layers", 1, MAX_COUNT),
                        c.int_range("n_heads", 1, MAX_DIM), c.int_range("vocab_size", 1, MAX_VOCAB),
                        c.int_range("ffn_multiple_of", 1, MAX_DIM), c.int_range("max_seq_len", 2, MAX_SEQ_LEN),
                        c.int_range("n_kv_heads", 1, MAX_DIM, none_ok=True),
                        c.int_range("n_experts", 0, MAX_EXPERTS), c.int_range("top_k", 1, MAX_EXPERTS),
                        c.int_range("expert_hidden", 1, MAX_DIM * 64, none_ok=True)])
        c.finite("aux_loss_coef", low=0, high=1e3)
        c.finite("capacity_factor", low=0, high=1e3, low_open=True, none_ok=True)
        c.finite("ffn_dim_multiplier", low=0, high=64, low_open=True, none_ok=True)
        c.finite("norm_eps", low=0, high=1, low_open=True)
        c.finite("rope_theta", low=0, low_open=True)
        if sizes_ok:
            c.need(self.dim % self.n_heads == 0, "dim", f"{self.dim} must divide by model.n_heads={self.n_heads}")
            c.need((self.dim // self.n_heads) % 2 == 0, "dim", "head size (dim / n_heads) must be even for RoPE")
            kv = self.kv_heads
            c.need(self.n_heads % kv == 0, "n_kv_heads", f"{kv} must divide n_heads={self.n_heads}")
            c.need(self.n_experts == 0 or self.top_k <= self.n_experts, "top_k",
                   f"{self.top_k} is more than model.n_experts={self.n_experts}")
            if not c.problems:
                params = self.approx_params()
                c.need(params <= MAX_PARAMS, "dim",
                       f"the model would have ~{params:.2g} parameters, more than can be allocated "
                       f"(limit {MAX_PARAMS:.0e}); lower dim, n_layers or vocab_size")
        c.done()

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def moe(self) -> bool:
        """True for a mixture-of-experts model (``n_experts > 0``)."""
        return self.n_experts > 0

    @property
    def moe_hidden(self) -> int:
        """Hidden size of one expert (``expert_hidden``, else the dense ``ffn_hidden``)."""
        return self.expert_hidden if self.expert_hidden is not None else self.ffn_hidden

    def approx_params(self) -> float:
        """Parameter count, embeddings and output included (float: no overflow for absurd sizes)."""
        head = self.dim // self.n_heads
        attn = self.dim * head * (2 * self.n_heads + 2 * self.kv_heads)
        if self.moe:
            ffn = 3.0 * self.dim * self.moe_hidden * (self.n_experts + self.shared_expert) + self.dim * self.n_experts
        else:
            ffn = 3.0 * self.dim * self.ffn_hidden
        return float(self.n_layers) * (attn + ffn) + 2.0 * self.vocab_size * self.dim

    @property
    def ffn_hidden(self) -> int:
        """SwiGLU hidden size: 2/3 of 4*dim, scaled, rounded up (as in Llama)."""
        hidden = int(2 * 4 * self.dim / 3)
        if self.ffn_dim_multiplier is not None:
            hidden = int(self.ffn_dim_multiplier * hidden)
        return self.ffn_multiple_of * ((hidden + self.ffn_multiple_of - 1) // self.ffn_multiple_of)


@dataclass(kw_only=True, slots=True)
class ParallelConfig:
    """Mesh sizes and per-parallelism options. Product of sizes = world size."""

    mesh: MeshMode = "manual"
    """``manual`` (use the sizes below) or ``auto`` (the planner picks them)."""
    dp_replicate: int = 1
    """Data-parallel replicas (DDP; HSDP when ``dp_shard > 1`` too)."""
    dp_shard: int = -1
    """FSDP2 shard group size; -1 = whatever the world size leaves over."""
    tp: int = 1
    """Tensor-parallel degree (DTensor ColwiseParallel/RowwiseParallel)."""
    pp: int = 1
    """Pipeline stages across ranks."""
    cp: int = 1
    """Context-parallel degree: each sequence is split over this many ranks (exact attention; the sequence
    length must divide by ``2 × cp`` for causal load balancing)."""
    ep: int = 1
    """Expert-parallel degree (MoE models only): routed experts are spread over this many ranks, which are
    data-parallel ranks for every other parameter; tokens reach their experts by all-to-all."""
    pp_schedule: PpSchedule = "1f1b"
    """``gpipe``, ``1f1b`` or ``interleaved`` (interleaved 1F1B)."""
    microbatches: int | None = None
    """Pipeline microbatches per step (default: the number of stages)."""
    virtual_stages: int = 2
    """Stages per rank for the interleaved schedule."""
    sequence_parallel: bool = True
    """Shard norms/activations along the sequence in TP regions."""
    loss_parallel: bool = True
    """Compute cross-entropy on vocab-sharded logits (TP only)."""
    reshard_after_forward: bool | None = None
    """FSDP2: free gathered parameters after forward (ZeRO-3) or keep them (ZeRO-2). Default: chosen by the
    planner (kept under pipeline parallelism, where every microbatch would gather them again)."""
    cpu_offload: bool = False
    """FSDP2: keep sharded parameters and optimizer state on the CPU."""
    device_memory_gb: float | None = None
    """Per-device memory for the ``auto`` planner (default: detected)."""
    auto_trials: int | None = None
    """``auto``: how many of the layouts that fit are measured before one is chosen: unset = every one of them
    (the estimate only orders them), N = the N best by the estimate, 0 = choose by the estimate alone."""
    auto_trial_steps: int = 3
    """``auto``: measured steps per trial (after one warm-up step)."""

    def __post_init__(self) -> None:
        c = Checks("parallel", self)
        c.need(self.mesh in ("manual", "auto"), "mesh", f"{self.mesh!r} is not 'manual' or 'auto'")
        for key in ("dp_replicate", "tp", "pp", "cp", "ep", "virtual_stages", "auto_trial_steps"):
            c.int_range(key, 1, MAX_COUNT)
        c.int_range("auto_trials", 0, MAX_COUNT, none_ok=True)
        c.need(self.dp_shard == -1 or 1 <= self.dp_shard <= MAX_COUNT, "dp_shard",
               f"must be within 1..{MAX_COUNT:,} or -1 (auto), got {self.dp_shard}")
        c.need(self.pp_schedule in PP_SCHEDULES, "pp_schedule",
               f"{self.pp_schedule!r} is not one of {', '.join(PP_SCHEDULES)}")
        c.int_range("microbatches", 1, MAX_COUNT, none_ok=True)
        c.finite("device_memory_gb", low=0, high=1e6, low_open=True, none_ok=True)
        c.done()


@dataclass(kw_only=True, slots=True)
class TrainConfig:
    """Optimisation loop."""

    steps: int = 20
    """Optimizer steps to run in total (a resumed run continues up to this)."""
    seed: int = 0
    """Seed for weights and data order (same seed = same run, on any mesh)."""
    global_batch: int = 8
    """Sequences per optimizer step across all data-parallel ranks."""
    seq_len: int = 64
    """Tokens per sequence."""
    grad_accum: int = 1
    """Micro-steps per optimizer step (each sees global_batch / grad_accum sequences)."""
    lr: float = 3e-3
    """Peak learning rate (AdamW)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    warmup_steps: int = 2
    """Linear warm-up steps."""
    decay: str = "cosine"
    """LR decay after warm-up: ``cosine``, ``linear`` or ``constant``."""
    min_lr_ratio: float = 0.1
    """Final LR as a fraction of ``lr``."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this (0 disables clipping)."""
    dtype: Precision = "fp32"
    """Compute precision: fp32, bf16, fp16 or tf32 (parameters stay fp32)."""
    ac: AcMode = "none"
    """Activation checkpointing: none, full, selective-op or selective-layer."""
    ac_every: int = 2
    """For selective-layer: checkpoint every N-th block."""
    compile: bool = False
    """torch.compile each transformer block."""
    compile_backend: str = "inductor"
    """torch.compile backend (``aot_eager`` compiles fast, for tests)."""
    device: TrainDevice = "auto"
    """``auto`` (CUDA when present, else CPU), ``cpu`` or ``cuda``."""
    peak_flops: float | None = None
    """Per-device peak FLOP/s for the MFU estimate (default: known GPUs only)."""

    def __post_init__(self) -> None:
        c = Checks("train", self)
        counts_ok = all([c.int_range("steps", 1, MAX_STEPS), c.int_range("global_batch", 1, MAX_COUNT),
                         c.int_range("seq_len", 1, MAX_SEQ_LEN), c.int_range("grad_accum", 1, MAX_COUNT),
                         c.int_range("ac_every", 1, MAX_COUNT)])
        c.int_range("seed", 0, 2**63 - 1)  # what torch.manual_seed takes
        c.int_range("warmup_steps", 0, MAX_STEPS)
        c.finite("lr", low=0, low_open=True)
        c.finite("weight_decay", low=0)
        c.finite("max_grad_norm", low=0)
        c.finite("min_lr_ratio", low=0, high=1)
        c.finite("peak_flops", low=0, low_open=True, none_ok=True)
        c.need(self.decay in ("cosine", "linear", "constant"), "decay",
               f"{self.decay!r} is not cosine, linear or constant")
        c.need(self.dtype in PRECISIONS, "dtype", f"{self.dtype!r} is not one of {', '.join(PRECISIONS)}")
        c.need(self.ac in AC_MODES, "ac", f"{self.ac!r} is not one of {', '.join(AC_MODES)}")
        c.need(self.device in ("auto", "cpu", "cuda"), "device", f"{self.device!r} is not auto, cpu or cuda")
        if counts_ok:
            c.need(self.global_batch % self.grad_accum == 0, "global_batch",
                   f"{self.global_batch} must divide by train.grad_accum={self.grad_accum}")
        c.done()


@dataclass(kw_only=True, slots=True)
class DataConfig:
    """Byte-level text from the Python standard library's own source files (no download)."""

    source: str = "stdlib"
    """``stdlib`` or a directory of text files (``*.py``, ``*.txt``, ``*.md``)."""
    max_bytes: int = 4_000_000
    """Read at most this many bytes of text (files in sorted order)."""

    def __post_init__(self) -> None:
        c = Checks("data", self)
        c.int_range("max_bytes", 1024, 1 << 36)
        c.need(bool(self.source.strip()), "source", "must be 'stdlib' or a folder of text files")
        c.done()


@dataclass(kw_only=True, slots=True)
class CheckpointConfig:
    """Distributed checkpoints (torch.distributed.checkpoint)."""

    dir: str | None = None
    """Directory for ``step-N`` checkpoints; none = no checkpoints, no resume."""
    interval: int = 50
    """Save every N steps (and at the end, and when a pause asks)."""
    async_save: bool = False
    """Save in the background (dcp.async_save) while training continues."""
    keep: int = 2
    """Keep the newest N checkpoints."""

    def __post_init__(self) -> None:
        c = Checks("checkpoint", self)
        c.int_range("interval", 1, MAX_STEPS)
        c.int_range("keep", 1, MAX_COUNT)
        c.need(self.dir is None or bool(self.dir.strip()), "dir", "must be a folder path (or unset)")
        c.done()


def _job_default(name: str) -> object:
    """The default of the ``JobOptions`` field ``name``: a setting a job and this file share has one default."""
    from greentrain.job.options import JobOptions

    return JobOptions.__dataclass_fields__[name].default


@dataclass(kw_only=True, slots=True)
class MetricsConfig:
    """Per-step metrics."""

    jsonl: str | None = None
    """Write one JSON line per step (rank 0): step, loss, grad_norm, tokens_per_s, ..."""
    # port, addr and allow_public are the job's metrics_* settings: their defaults and checks are JobOptions'.
    port: int | None = cast("int | None", _job_default("metrics_port"))
    """Serve Prometheus metrics on this port (rank 0); 0 = any free port."""
    addr: str = cast(str, _job_default("metrics_addr"))
    """Address the metrics server binds."""
    allow_public: bool = cast(bool, _job_default("metrics_allow_public"))
    """Allow a non-loopback ``addr`` (the endpoint is unauthenticated; a warning is logged)."""
    log_every: int = 1
    """Print a progress line every N steps (rank 0)."""
    fetch_every: int | None = None
    """Read loss and grad norm from the device every N steps (one host sync per N steps; a greentrain
    session reads the loss once per precision-guard window). Default: 10 on a GPU, 1 on the CPU."""

    def __post_init__(self) -> None:
        from greentrain.job.options import option_problems

        c = Checks("metrics", self)
        for name, why in option_problems({"metrics_port": self.port, "metrics_addr": self.addr}):
            c.need(False, name.removeprefix("metrics_"), why)  # the job's own checks of these two settings
        c.int_range("log_every", 1, MAX_STEPS)
        c.int_range("fetch_every", 1, MAX_STEPS, none_ok=True)
        c.done()


RUNTIME_DEFAULTS: dict[str, object] = {"policy": None, "pause_mode": "checkpoint", "relaunch": "auto",
                                       "actuation": "apply"}
"""Where a training run's defaults differ from a ``Session``'s: no policy means plain training; a pause
checkpoints on every rank; one process re-execs itself, several exit for ``torchrun``/the scheduler to
restart them; GPU settings are applied unless ``--advise-only`` says otherwise."""


def _greentrain_section() -> type[GreentrainSection]:
    """``[greentrain]``: every ``JobOptions`` field offered to ``greentrain train``, read by its rules."""
    from greentrain.job.options import option_problems, settings_for

    offered = settings_for("train")
    fields = []
    for s in offered:
        default = RUNTIME_DEFAULTS.get(s.name, s.default)
        fields.append((s.name, s.hint | None if default is None else s.hint, field(default=default)))  # type: ignore[operator]

    def __post_init__(self: object) -> None:
        c = Checks("greentrain", self)
        values = {s.name: getattr(self, s.name) for s in offered}
        if values["policy"] is None:  # plain training: no policy to check
            del values["policy"]
        for name, why in option_problems(values):
            c.need(False, name, why)
        c.done()

    doc = ("Run under the greentrain engine (carbon/energy policy at step boundaries). Each key is the "
           "``greentrain.job.JobOptions`` field of the same name, with its type, choices, docstring and check; "
           "``RUNTIME_DEFAULTS`` are this section's own defaults.")
    built = make_dataclass("GreentrainConfig", fields, kw_only=True, slots=True,
                           namespace={"__post_init__": __post_init__, "__doc__": doc, "__module__": __name__})
    return cast("type[GreentrainSection]", built)  # its fields are GreentrainSection's, which mypy cannot see


GreentrainConfig = _greentrain_section()

JOB_OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(GreentrainConfig))
"""The ``[greentrain]`` keys: the ``greentrain.job.JobOptions`` fields a training run takes."""


SECTIONS: dict[str, type] = {  # [section] name -> its dataclass
    "model": ModelConfig,
    "parallel": ParallelConfig,
    "train": TrainConfig,
    "data": DataConfig,
    "checkpoint": CheckpointConfig,
    "metrics": MetricsConfig,
    "greentrain": GreentrainConfig,
}
