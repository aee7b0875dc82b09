"""A GPU double whose settings live in a file, so they outlive a killed process.

Restore-after-SIGKILL can only be tested if the "hardware" state survives the
process that changed it, as a real GPU's does. ``FileBackedGPU`` keeps power
limit and locked clocks in a JSON file (atomic replace) and takes speed and
power at each limit from the measured Zeus profiles
(``greentrain.device.profiles``), interpolating between measured limits.
Locked SM clocks use a simple model (documented on ``_clock_factors``),
because the profiles measure power limits only.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path
from typing import TypedDict, Unpack

from greentrain.device.profiles import interpolate
from greentrain.errors import ConfigError, PrivilegeError
from greentrain.testing.fake_gpu import ProfiledGPU, ProfiledGPUOptions

__all__ = ["FileBackedGPU", "MAX_SM_CLOCK_MHZ"]

# Boost clocks from NVIDIA's data sheets (V100 SXM2, A40, Quadro RTX 6000).
MAX_SM_CLOCK_MHZ = {"v100": 1530, "a40": 1740, "rtx6000": 1770}
_MEMORY_BOUND_FRACTION = 0.3  # share of step time that does not scale with SM clock
_IDLE_FRACTION = 0.25  # share of board power that does not scale with SM clock


class _Settings(TypedDict, total=False):
    """The state file: both keys are always written; ``_update`` passes either."""

    power_limit_w: float
    sm_clocks_mhz: list[int] | None


class FileBackedGPU(ProfiledGPU):
    """Test double of one GPU; ``state_file`` holds the settings (shared across processes)."""

    def __init__(
        self,
        state_file: str | Path,
        gpu_model: str = "a40",
        workload: str = "imagenet/resnet50",
        batch_size: int | None = None,
        *,
        noise: float = 0.0,
        seed: int = 0,
        **options: Unpack[ProfiledGPUOptions],
    ) -> None:
        super().__init__(gpu_model, workload, batch_size, **options)
        self._fastest_s = min(p.time_per_epoch_s for p in self.points)
        self.state_file = Path(state_file)
        self.name = f"fake {gpu_model.upper()} ({workload})"
        self.architecture = {"v100": "volta", "a40": "ampere", "rtx6000": "turing"}.get(gpu_model, "unknown")
        self.gpu_model = gpu_model
        self._max_clock_mhz = MAX_SM_CLOCK_MHZ.get(gpu_model, 1500)
        self._noise = noise
        self._rng = random.Random(seed)
        self._energy_j = 0.0
        self._t_last = self._time_fn()
        if not self.state_file.exists():
            self._write({"power_limit_w": self.power_limit_constraints().default_w, "sm_clocks_mhz": None})

    def _uuid_name(self, gpu_model: str) -> str:
        return f"{gpu_model}/{self.index}"

    # -- state file --------------------------------------------------------------
    def settings(self) -> _Settings:
        """The settings as the state file holds them now (what a test prints when one leaked)."""
        return json.loads(self.state_file.read_text(encoding="utf-8"))

    def _write(self, state: _Settings) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.state_file.parent, prefix=".fakegpu-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
        os.replace(tmp, self.state_file)

    def _update(self, **changes: Unpack[_Settings]) -> None:
        self._accumulate()  # energy so far was drawn at the old setting
        state = self.settings()
        state.update(changes)
        self._write(state)

    # -- model ----------------------------------------------------------------------
    def _at_limit(self, power_limit_w: float) -> tuple[float, float]:
        """(time per epoch s, power W) at a limit, linear between measured limits."""
        point = interpolate(self.points, power_limit_w)
        return point.time_per_epoch_s, point.average_power_w

    def _clock_factors(self, clocks: tuple[int, int] | None) -> tuple[float, float]:
        """(time multiplier, power multiplier) of a clock lock: compute part ~ 1/f, dynamic power ~ f^2."""
        if clocks is None:
            return 1.0, 1.0
        ratio = min(1.0, clocks[1] / self._max_clock_mhz)
        time_x = _MEMORY_BOUND_FRACTION + (1 - _MEMORY_BOUND_FRACTION) / ratio
        power_x = _IDLE_FRACTION + (1 - _IDLE_FRACTION) * ratio**2
        return time_x, power_x

    def _operating(self) -> tuple[float, float]:
        state = self.settings()
        t, p = self._at_limit(state["power_limit_w"])
        clocks = state.get("sm_clocks_mhz")
        time_x, power_x = self._clock_factors((clocks[0], clocks[1]) if clocks else None)
        return t * time_x, min(p * power_x, state["power_limit_w"] * 1.02)

    def relative_speed(self) -> float:
        """Progress rate at current settings relative to the fastest measured setting."""
        return self._fastest_s / self._operating()[0]

    def step_time_s(self, base_step_s: float) -> float:
        """Duration of a step that takes ``base_step_s`` at the fastest setting."""
        jitter = 1 + self._rng.uniform(-self._noise, self._noise) if self._noise else 1.0
        return base_step_s / self.relative_speed() * jitter

    def _accumulate(self) -> None:
        now = self._time_fn()
        self._energy_j += self.power_w() * max(0.0, now - self._t_last)
        self._t_last = now

    # -- GPU ABC (capabilities, power-limit range, clock ladder: ProfiledGPU's) ---------------------
    def total_energy_j(self) -> float:
        self._check()
        self._accumulate()
        return self._energy_j

    def power_w(self) -> float:
        self._check()
        power = self._operating()[1]
        return power * (1 + self._rng.uniform(-self._noise, self._noise)) if self._noise else power

    def power_limit_w(self) -> float:
        self._check()
        return float(self.settings()["power_limit_w"])

    def _privileged_call(self, name: str, value: object) -> None:
        self._check()
        if not self.privileged:
            raise PrivilegeError(f"GPU {self.uuid}: {name} needs root (NVML_ERROR_NO_PERMISSION)")
        self.set_calls.append((name, value))

    def set_power_limit_w(self, power_limit_w: float) -> None:
        c = self.power_limit_constraints()
        if not c.min_w <= power_limit_w <= c.max_w:
            raise ConfigError(f"GPU {self.uuid}: power limit {power_limit_w} W outside [{c.min_w}, {c.max_w}] W")
        self._privileged_call("power_limit_w", float(power_limit_w))
        self._update(power_limit_w=float(power_limit_w))

    def sm_clock_mhz(self) -> int:
        self._check()
        clocks = self.settings().get("sm_clocks_mhz")
        return int(clocks[1]) if clocks else self._max_clock_mhz

    def locked_sm_clocks_mhz(self) -> tuple[int, int] | None:
        """The locked range (the fake can tell; NVML cannot)."""
        clocks = self.settings().get("sm_clocks_mhz")
        return (int(clocks[0]), int(clocks[1])) if clocks else None

    def lock_sm_clocks_mhz(self, min_mhz: int, max_mhz: int) -> None:
        supported = self.supported_sm_clocks_mhz()
        if min_mhz > max_mhz or min_mhz < min(supported) or max_mhz > max(supported):
            raise ConfigError(f"GPU {self.uuid}: clocks ({min_mhz}, {max_mhz}) MHz not supported")
        self._privileged_call("sm_clocks_mhz", (min_mhz, max_mhz))
        self._update(sm_clocks_mhz=[int(min_mhz), int(max_mhz)])

    def reset_sm_clocks(self) -> None:
        self._privileged_call("sm_clocks_mhz", None)
        self._update(sm_clocks_mhz=None)

    def temperature_c(self) -> float:
        self._check()
        return 60.0

    def throttle_reasons(self) -> list[str]:
        self._check()
        state = self.settings()
        return ["sw_power_cap"] if state["power_limit_w"] < self.power_limit_constraints().max_w else []

    def is_default(self) -> bool:
        """Whether every setting is at its default (what a leak test checks)."""
        state = self.settings()
        return state["power_limit_w"] == self.power_limit_constraints().default_w and not state.get("sm_clocks_mhz")
