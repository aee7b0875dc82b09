"""Per-step training metrics: the record, the MFU estimate, the JSONL writer.

MFU (model FLOPs utilisation) = achieved model FLOP/s ÷ peak FLOP/s. Model
FLOPs per token follow the usual estimate ``6·N + 12·L·d·T`` (N non-embedding
parameters, L layers, d width, T sequence length: matmuls forward + backward
plus attention scores). Peak is known only for listed GPUs (dense, no
sparsity), or given in the config; otherwise MFU is left out rather than
guessed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.runtime.config import ModelConfig
from greentrain.runtime.model import count_params

__all__ = ["StepMetrics", "flops_per_token", "peak_flops", "MetricsWriter"]

# Dense peak FLOP/s by (device-name fragment, precision), from the vendors' datasheets.
_PEAKS: dict[str, dict[str, float]] = {
    "H200": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "H100": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "A100": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "L40S": {"bf16": 362e12, "fp16": 362e12, "tf32": 183e12, "fp32": 91.6e12},
    "A40": {"bf16": 149.7e12, "fp16": 149.7e12, "tf32": 74.8e12, "fp32": 37.4e12},
    "V100": {"fp16": 125e12, "fp32": 15.7e12, "tf32": 15.7e12},
}


@dataclass(slots=True, kw_only=True)
class StepMetrics:
    """What one optimizer step did (global over all ranks)."""

    step: int
    """1-based number of completed optimizer steps."""
    loss: float
    grad_norm: float
    """Global gradient norm before clipping."""
    lr: float
    tokens: int
    tokens_per_s: float
    step_time_s: float
    precision: str
    mfu: float | None = None
    aux_loss: float | None = None
    """MoE: the load-balancing loss (per-block, summed; weighted by ``model.aux_loss_coef`` in the objective,
    not in ``loss``, which is the language-model loss)."""
    expert_imbalance: float | None = None
    """MoE: tokens of the busiest expert over the mean, in the worst block (1.0 = balanced)."""
    expert_tokens: list[int] | None = None
    """MoE: tokens routed to each expert this step, summed over blocks and ranks."""


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token (forward + backward)."""
    # The embedding lookup is not a matmul; of a MoE block's experts a token uses top_k.
    non_embedding = count_params(cfg, include_embedding=False, active=True)
    return 6.0 * non_embedding + 12.0 * cfg.n_layers * cfg.dim * seq_len


def peak_flops(device_name: str, precision: str) -> float | None:
    """Peak dense FLOP/s of one device at ``precision``; None when unknown (e.g. CPUs)."""
    for fragment, table in _PEAKS.items():
        if fragment in device_name.upper():
            return table.get(precision)
    return None


class MetricsWriter:
    """Append one JSON object per step to ``path`` (rank 0 only); line-buffered so a kill loses nothing."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8", buffering=1)
        except OSError as e:
            raise ConfigError(f"--metrics-jsonl {self.path}: cannot write ({e.strerror})") from None

    def write(self, metrics: StepMetrics) -> None:
        record = {k: v for k, v in asdict(metrics).items() if v is not None}
        self._file.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self._file.close()
