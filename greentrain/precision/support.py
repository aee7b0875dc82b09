"""Which precisions this machine can run, and why not when it cannot.

Checked up front so a disallowed dtype is refused with the reason and the fix
before training starts — never discovered as an exception inside a step.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from greentrain.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["PRECISIONS", "unsupported_reason", "autocast_dtype"]

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""Known names; fp32 is plain float32 without reduced-precision matmuls."""


def _cuda_capability(device_type: str) -> tuple[int, int] | None:
    if device_type != "cuda":
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability()


def unsupported_reason(precision: str, device_type: str) -> str | None:
    """None if ``precision`` can run on ``device_type`` ('cpu' or 'cuda') here, else why not and the fix."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision: {precision!r} is not one of {', '.join(PRECISIONS)}")
    if device_type not in ("cpu", "cuda"):
        raise ConfigError(f"device_type: {device_type!r} is not 'cpu' or 'cuda'")
    capability = _cuda_capability(device_type)
    if device_type == "cuda" and capability is None:
        return "device_type='cuda' but torch sees no CUDA device"
    if precision == "fp32":
        return None
    if precision == "tf32":
        if capability is None or capability < (8, 0):
            return "tf32 needs an NVIDIA GPU with compute capability >= 8.0 (Ampere or newer)"
        return None
    if precision == "bf16":
        if device_type == "cuda":
            import torch

            return None if torch.cuda.is_bf16_supported() else "this GPU has no bf16 support (needs Ampere or newer)"
        return None  # CPU autocast supports bf16 (fast only with AVX512-BF16/AMX: measured, not assumed)
    if precision == "fp16":
        return None  # autocast fp16 runs on CUDA and on CPU; a grad scaler guards underflow
    # fp8
    missing = []
    if importlib.util.find_spec("torchao") is None:
        missing.append("torchao is not installed (pip install torchao)")
    if capability is None or capability < (8, 9):
        missing.append("fp8 matmuls need an NVIDIA GPU with compute capability >= 8.9 (Ada, Hopper or newer)")
    if missing:
        return "; ".join(missing)
    return (
        "fp8 training swaps the model's Linear layers (torchao.float8.convert_to_float8_training) and cannot be "
        "switched back at a step boundary; convert the model before training instead of trialling fp8"
    )


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The torch dtype autocast uses for ``precision`` (None: no autocast)."""
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
