"""Whether a knob value fits a GPU: its power-limit constraints and supported SM clocks (reads only).

Shared by ``KnobController`` (before a change) and ``AdvisoryActuators`` (to
say why advice could not be applied as is); neither writes to the GPU here.
"""

from __future__ import annotations

from greentrain.device.base import GPU
from greentrain.errors import ConfigError, NotSupportedError

__all__ = ["validate_power_limit", "validate_sm_clocks"]


def validate_power_limit(gpu: GPU, power_limit_w: float) -> float:
    """The limit as float if within the GPU's constraints, else ConfigError naming the range."""
    if not gpu.capabilities.power_limit_control:
        raise NotSupportedError(f"GPU {gpu.uuid} ({gpu.name}): the power limit cannot be changed on this device")
    c = gpu.power_limit_constraints()
    value = float(power_limit_w)
    if not (c.min_w <= value <= c.max_w):
        raise ConfigError(
            f"power_limit_w={value:g} for GPU {gpu.uuid} is outside its constraints "
            f"[{c.min_w:g}, {c.max_w:g}] W (default {c.default_w:g} W)"
        )
    return value


def validate_sm_clocks(gpu: GPU, min_mhz: int, max_mhz: int) -> tuple[int, int]:
    """The range if the GPU supports it, else ConfigError naming the supported range."""
    if not gpu.capabilities.clock_control:
        raise NotSupportedError(f"GPU {gpu.uuid} ({gpu.name}): SM clocks cannot be locked on this device")
    supported = gpu.supported_sm_clocks_mhz()
    if not supported:
        raise NotSupportedError(f"GPU {gpu.uuid}: reports no supported SM clocks; clock locking unavailable")
    low, high = min(supported), max(supported)
    if int(min_mhz) != min_mhz or int(max_mhz) != max_mhz or min_mhz > max_mhz:
        raise ConfigError(f"sm_clocks_mhz=({min_mhz}, {max_mhz}): need integers with min <= max")
    if min_mhz < low or max_mhz > high:
        raise ConfigError(
            f"sm_clocks_mhz=({min_mhz}, {max_mhz}) for GPU {gpu.uuid} is not supported; "
            f"supported SM clocks are {low}..{high} MHz"
        )
    return int(min_mhz), int(max_mhz)
