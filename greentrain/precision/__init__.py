"""Precision policy: choose fp32/tf32/bf16/fp16 by measured energy per step, with a loss guard that reverts.

``PrecisionController`` is what a training loop (or ``Session``) holds: it
gives the ``autocast()`` context and grad scaler for the current precision
and decides switches at step boundaries, identically on all ranks.
"""

from greentrain.precision.controller import Phase, PrecisionConfig, PrecisionController
from greentrain.precision.support import PRECISIONS, autocast_dtype, unsupported_reason

__all__ = ["PrecisionController", "PrecisionConfig", "Phase", "PRECISIONS", "unsupported_reason", "autocast_dtype"]
