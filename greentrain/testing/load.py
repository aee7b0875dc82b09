"""Power draws for the fake GPUs, with exact energy integrals, and the H100 figures that calibrate them.

A draw is a function of time: ``power_w(t)`` and its exact integral
``energy_j(t0, t1)``, so a test can compare what a monitor measured with the
true energy. ``LoadWave`` is training-like load that switches between a busy
and a resting draw; ``H100`` holds the figures measured on one NVIDIA H100
80GB HBM3 on 2026-11-23 (greentrain's GPU measurements, see
docs/measurement.md), which ``h100_wave`` turns into a wave.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

__all__ = ["PowerDraw", "LoadWave", "H100", "h100_wave", "NVML_REFRESH_S"]

NVML_REFRESH_S = 0.1
"""Refresh period of NVML's total-energy counter and instant power field, measured on an H100 (2026-11-23)."""


class PowerDraw(Protocol):
    """A board power draw over time (seconds on the fake's clock)."""

    def power_w(self, t: float) -> float: ...

    def energy_j(self, t0: float, t1: float) -> float:
        """Exact integral of ``power_w`` from ``t0`` to ``t1``."""
        ...


@dataclass(frozen=True, slots=True)
class H100:
    """Board power of an H100 80GB HBM3 (SXM, 700 W limit), measured 2026-11-23 with nvidia-smi and NVML."""

    rest_w: float = 71.0
    """At rest, no work."""
    after_load_w: float = 130.0
    """In the seconds after heavy load stops (the board does not drop to rest at once)."""
    matmul_w: float = 687.0
    """8192^3 bf16 matmuls back to back."""
    small_matmul_w: float = 306.0
    """Many small (1024^3) matmuls."""
    train_bf16_w: float = 548.0
    train_tf32_w: float = 611.0
    train_fp32_w: float = 652.0
    """greentrain's reference model (d=768, 12 layers), mean power per precision."""
    power_limit_w: float = 700.0
    min_power_limit_w: float = 200.0


@dataclass(frozen=True, slots=True)
class LoadWave:
    """Square-wave load: ``busy_w`` for ``duty`` of every ``period_s``, ``idle_w`` for the rest.

    ``phase_s`` shifts the wave; pick a period that is not a multiple of the
    NVML refresh (100 ms) to exercise sampling that does not line up with it.
    """

    busy_w: float
    idle_w: float
    period_s: float
    duty: float = 0.5
    phase_s: float = 0.0

    def __post_init__(self) -> None:
        if not (self.period_s > 0 and 0.0 <= self.duty <= 1.0 and self.busy_w >= 0 and self.idle_w >= 0):
            raise ValueError(f"LoadWave: need period_s > 0, 0 <= duty <= 1 and powers >= 0; got {self!r}")

    def _busy_s(self, t: float) -> float:
        """Seconds spent busy from the wave's origin to ``t`` (an antiderivative of the busy indicator)."""
        x = t - self.phase_s
        cycles = math.floor(x / self.period_s)
        within = x - cycles * self.period_s
        return cycles * self.duty * self.period_s + min(within, self.duty * self.period_s)

    def power_w(self, t: float) -> float:
        within = (t - self.phase_s) % self.period_s
        return self.busy_w if within < self.duty * self.period_s else self.idle_w

    def energy_j(self, t0: float, t1: float) -> float:
        busy_s = self._busy_s(t1) - self._busy_s(t0)
        return self.busy_w * busy_s + self.idle_w * ((t1 - t0) - busy_s)


def h100_wave(period_s: float = 0.37, duty: float = 0.6, phase_s: float = 0.0, busy_w: float | None = None) -> LoadWave:
    """Training-like H100 load: bf16 training power while busy, the after-load draw in between."""
    figures = H100()
    return LoadWave(busy_w if busy_w is not None else figures.train_bf16_w, figures.after_load_w,
                    period_s, duty, phase_s)  # fmt: skip
