"""Training configuration: one small dataclass per component, loaded from TOML.

A config file has the sections ``[model]``, ``[parallel]``, ``[train]``,
``[data]``, ``[checkpoint]``, ``[metrics]`` and ``[greentrain]``; every key is a
field below (its docstring is the documentation). Unknown keys and bad values
raise :class:`~greentrain.errors.ConfigError` naming ``section.key`` and the
file. Built-in presets live in ``greentrain/runtime/presets/<name>.toml``.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError

__all__ = [
    "ModelConfig",
    "ParallelConfig",
    "TrainConfig",
    "DataConfig",
    "CheckpointConfig",
    "MetricsConfig",
    "GreentrainConfig",
    "JobConfig",
    "PRECISIONS",
    "PP_SCHEDULES",
    "list_presets",
    "load_config",
    "config_from_dict",
]

PRECISIONS = ("fp32", "bf16", "fp16", "tf32")
PP_SCHEDULES = ("gpipe", "1f1b", "interleaved")
AC_MODES = ("none", "full", "selective-op", "selective-layer")


def _need(cond: bool, key: str, why: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {why}")


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
    """Key/value heads for grouped-query attention (default: ``n_heads``)."""
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

    def __post_init__(self) -> None:
        for key in ("dim", "n_layers", "n_heads", "vocab_size", "ffn_multiple_of", "max_seq_len"):
            _need(getattr(self, key) > 0, f"model.{key}", "must be > 0")
        _need(self.dim % self.n_heads == 0, "model.dim", f"{self.dim} must divide by model.n_heads={self.n_heads}")
        _need((self.dim // self.n_heads) % 2 == 0, "model.dim", "head size (dim / n_heads) must be even for RoPE")
        kv = self.kv_heads
        _need(kv > 0 and self.n_heads % kv == 0, "model.n_kv_heads", f"{kv} must divide n_heads={self.n_heads}")

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

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

    mesh: str = "manual"
    """``manual`` (use the sizes below) or ``auto`` (the planner picks them)."""
    dp_replicate: int = 1
    """Data-parallel replicas (DDP; HSDP when ``dp_shard > 1`` too)."""
    dp_shard: int = -1
    """FSDP2 shard group size; -1 = whatever the world size leaves over."""
    tp: int = 1
    """Tensor-parallel degree (DTensor ColwiseParallel/RowwiseParallel)."""
    pp: int = 1
    """Pipeline stages across ranks."""
    pp_schedule: str = "1f1b"
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

    def __post_init__(self) -> None:
        _need(self.mesh in ("manual", "auto"), "parallel.mesh", f"{self.mesh!r} is not 'manual' or 'auto'")
        for key in ("dp_replicate", "tp", "pp", "virtual_stages"):
            _need(getattr(self, key) >= 1, f"parallel.{key}", "must be >= 1")
        _need(self.dp_shard == -1 or self.dp_shard >= 1, "parallel.dp_shard", "must be >= 1 or -1 (auto)")
        _need(self.pp_schedule in PP_SCHEDULES, "parallel.pp_schedule",
              f"{self.pp_schedule!r} is not one of {', '.join(PP_SCHEDULES)}")
        _need(self.microbatches is None or self.microbatches >= 1, "parallel.microbatches", "must be >= 1")


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
    dtype: str = "fp32"
    """Compute precision: fp32, bf16, fp16 or tf32 (parameters stay fp32)."""
    ac: str = "none"
    """Activation checkpointing: none, full, selective-op or selective-layer."""
    ac_every: int = 2
    """For selective-layer: checkpoint every N-th block."""
    compile: bool = False
    """torch.compile each transformer block."""
    compile_backend: str = "inductor"
    """torch.compile backend (``aot_eager`` compiles fast, for tests)."""
    device: str = "auto"
    """``auto`` (CUDA when present, else CPU), ``cpu`` or ``cuda``."""
    peak_flops: float | None = None
    """Per-device peak FLOP/s for the MFU estimate (default: known GPUs only)."""

    def __post_init__(self) -> None:
        for key in ("steps", "global_batch", "seq_len", "grad_accum", "ac_every"):
            _need(getattr(self, key) >= 1, f"train.{key}", "must be >= 1")
        _need(self.lr > 0, "train.lr", "must be > 0")
        _need(self.warmup_steps >= 0, "train.warmup_steps", "must be >= 0")
        _need(self.max_grad_norm >= 0, "train.max_grad_norm", "must be >= 0")
        _need(0 <= self.min_lr_ratio <= 1, "train.min_lr_ratio", "must be within [0, 1]")
        _need(self.decay in ("cosine", "linear", "constant"), "train.decay",
              f"{self.decay!r} is not cosine, linear or constant")
        _need(self.dtype in PRECISIONS, "train.dtype", f"{self.dtype!r} is not one of {', '.join(PRECISIONS)}")
        _need(self.ac in AC_MODES, "train.ac", f"{self.ac!r} is not one of {', '.join(AC_MODES)}")
        _need(self.device in ("auto", "cpu", "cuda"), "train.device", f"{self.device!r} is not auto, cpu or cuda")
        _need(self.global_batch % self.grad_accum == 0, "train.global_batch",
              f"{self.global_batch} must divide by train.grad_accum={self.grad_accum}")


@dataclass(kw_only=True, slots=True)
class DataConfig:
    """Byte-level text from the Python standard library's own source files (no download)."""

    source: str = "stdlib"
    """``stdlib`` or a directory of text files (``*.py``, ``*.txt``, ``*.md``)."""
    max_bytes: int = 4_000_000
    """Read at most this many bytes of text (files in sorted order)."""

    def __post_init__(self) -> None:
        _need(self.max_bytes >= 1024, "data.max_bytes", "must be >= 1024")


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
        _need(self.interval >= 1, "checkpoint.interval", "must be >= 1")
        _need(self.keep >= 1, "checkpoint.keep", "must be >= 1")


@dataclass(kw_only=True, slots=True)
class MetricsConfig:
    """Per-step metrics."""

    jsonl: str | None = None
    """Write one JSON line per step (rank 0): step, loss, grad_norm, tokens_per_s, ..."""
    port: int | None = None
    """Serve Prometheus metrics on this port (rank 0); 0 = any free port."""
    addr: str = "127.0.0.1"
    """Address the metrics server binds."""
    allow_public: bool = False
    """Allow a non-loopback ``addr`` (the endpoint is unauthenticated; a warning is logged)."""
    log_every: int = 1
    """Print a progress line every N steps (rank 0)."""
    fetch_every: int | None = None
    """Read loss and grad norm from the device every N steps (one host sync per N steps; a step hook such
    as a greentrain session still reads every step). Default: 10 on a GPU, 1 on the CPU."""

    def __post_init__(self) -> None:
        _need(self.port is None or 0 <= self.port <= 65535, "metrics.port", "must be within 0..65535")
        _need(self.log_every >= 1, "metrics.log_every", "must be >= 1")
        _need(self.fetch_every is None or self.fetch_every >= 1, "metrics.fetch_every", "must be >= 1")


@dataclass(kw_only=True, slots=True)
class GreentrainConfig:
    """Run under the greentrain engine (carbon/energy policy at step boundaries)."""

    policy: str | None = None
    """Policy name or TOML file; none = plain training."""
    zone: str | None = None
    """Grid zone (e.g. GB, US-CAL-CISO)."""
    provider: str | None = None
    """Carbon-intensity provider name."""
    deadline: str | None = None
    """ISO-8601 with timezone or '+H' hours from now."""
    pause_mode: str = "checkpoint"
    """``checkpoint`` (save and exit; relaunch resumes) or ``suspend`` (wait in-process)."""
    job: str = "greentrain"
    """Job name used in metrics."""
    relaunch: str = "auto"
    """After a checkpoint pause: ``exec`` (wait, re-exec), ``exit`` (exit 75 for torchrun/scheduler to
    restart), ``none`` (return), ``auto`` (exec for one process, exit for several)."""

    def __post_init__(self) -> None:
        _need(self.pause_mode in ("checkpoint", "suspend"), "greentrain.pause_mode",
              f"{self.pause_mode!r} is not checkpoint or suspend")
        _need(self.relaunch in ("auto", "exec", "exit", "none"), "greentrain.relaunch",
              f"{self.relaunch!r} is not auto, exec, exit or none")


_SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "parallel": ParallelConfig,
    "train": TrainConfig,
    "data": DataConfig,
    "checkpoint": CheckpointConfig,
    "metrics": MetricsConfig,
    "greentrain": GreentrainConfig,
}


@dataclass(kw_only=True, slots=True)
class JobConfig:
    """A whole training job."""

    model: ModelConfig = field(default_factory=ModelConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    greentrain: GreentrainConfig = field(default_factory=GreentrainConfig)

    def __post_init__(self) -> None:
        _need(self.train.seq_len <= self.model.max_seq_len, "train.seq_len",
              f"{self.train.seq_len} exceeds model.max_seq_len={self.model.max_seq_len}")

    def replace(self, section: str, **changes: Any) -> "JobConfig":
        """A copy with ``changes`` applied to one section (validated again)."""
        data = self.to_dict()
        data[section].update(changes)
        return config_from_dict(data, origin="overrides")

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: dataclasses.asdict(getattr(self, name)) for name in _SECTIONS}


def _check_type(value: Any, fld: dataclasses.Field, key: str) -> Any:
    annotation = str(fld.type)
    if isinstance(value, bool) and "bool" not in annotation:
        raise ConfigError(f"{key}: expected {annotation}, got a boolean")
    if "float" in annotation and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    expected = [t for t, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")) if name in annotation]
    if value is None and "None" in annotation:
        return value
    if expected and not isinstance(value, tuple(expected)):
        raise ConfigError(f"{key}: expected {annotation}, got {type(value).__name__} {value!r}")
    return value


def config_from_dict(data: dict[str, Any], origin: str = "<dict>") -> JobConfig:
    """Build and validate a JobConfig; errors name ``origin`` and ``section.key``."""
    sections: dict[str, Any] = {}
    try:
        for name, value in data.items():
            if name not in _SECTIONS:
                raise ConfigError(f"unknown section [{name}]; valid: {', '.join(_SECTIONS)}")
            if not isinstance(value, dict):
                raise ConfigError(f"[{name}] must be a table")
            cls = _SECTIONS[name]
            fields = {f.name: f for f in dataclasses.fields(cls)}
            kwargs = {}
            for key, item in value.items():
                if key not in fields:
                    raise ConfigError(f"{name}.{key}: unknown key; valid: {', '.join(fields)}")
                kwargs[key] = _check_type(item, fields[key], f"{name}.{key}")
            sections[name] = cls(**kwargs)
        return JobConfig(**sections)
    except ConfigError as e:
        raise ConfigError(f"{origin}: {e}") from None


def list_presets() -> list[str]:
    """Names of the built-in presets."""
    folder = resources.files("greentrain.runtime") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_config(name_or_path: str | Path) -> JobConfig:
    """Load a TOML file, or a built-in preset by name (``tiny``, ``125m``, ``1b``)."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"--config {path}: cannot read ({e.strerror})") from None
        origin = str(path)
    else:
        presets = list_presets()
        if str(name_or_path) not in presets:
            raise ConfigError(f"--config {name_or_path!r}: no such file or preset; presets: {', '.join(presets)}")
        text = (resources.files("greentrain.runtime") / "presets" / f"{name_or_path}.toml").read_text("utf-8")
        origin = f"preset {name_or_path}"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{origin}: invalid TOML ({e})") from None
    return config_from_dict(data, origin=origin)
