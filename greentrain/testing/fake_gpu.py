"""A GPU double that behaves like measured hardware, for tests and simulations without a GPU.

Power and speed at each power limit come from the measured Zeus profiles
(``greentrain.device.profiles``), linearly interpolated between measured
limits. On top sits a small deterministic ripple (two slow sinusoids, as a
training loop's phases produce), so integration code is exercised on a
varying signal; a ``draw`` (e.g. ``greentrain.testing.load.h100_wave``)
replaces that with a given load. ``true_energy_j`` is the exact integral of
the power over ``time_fn`` time, the ground truth tests compare against.

Like NVML on an H100, the counter (``total_energy_j``) and the power reading
(``power_w``, the average over the last refresh period) change only every
``refresh_period_s`` (100 ms), not continuously; ``refresh_period_s=None``
gives continuous values. ``call_costs=True`` makes each read spend the
measured CPU cost of the NVML call behind it (``greentrain.testing.costs``).
"""

from __future__ import annotations

import bisect
import math
import threading
import time
import uuid as uuid_mod
from abc import abstractmethod
from collections.abc import Callable
from typing import TypedDict, Unpack

from greentrain.device.base import GPU, GPUCapabilities, PowerLimitConstraints
from greentrain.device.nvml_errors import PRIVILEGE_FIX
from greentrain.device.profiles import GPUProfile, ProfilePoint, interpolate, load_gpu_profile
from greentrain.errors import ConfigError, NotSupportedError, PrivilegeError
from greentrain.testing.costs import NVML_CALL_COST_S, spend_cpu_s
from greentrain.testing.load import NVML_REFRESH_S, PowerDraw

__all__ = ["FakeGPU", "GPU_MODELS", "ProfiledGPU", "ProfiledGPUOptions"]

# Model facts for the profiled GPUs: (marketing name, architecture, max SM clock MHz).
GPU_MODELS = {
    "v100": ("Tesla V100-PCIE-32GB", "volta", 1380),
    "a40": ("NVIDIA A40", "ampere", 1740),
    "rtx6000": ("Quadro RTX 6000", "turing", 2100),
}
_MIN_CLOCK_MHZ = 210
_CLOCK_STEP_MHZ = 15
# Ripple = amplitude x (0.6 sin(2 pi t / 2.3 s) + 0.4 sin(2 pi t / 0.9 s + 1)): slow enough to be sampled at 0.1 s.
_HARMONICS = ((0.6, 2.3, 0.0), (0.4, 0.9, 1.0))


def _ripple_integral(t: float) -> float:
    """Antiderivative of the unit ripple shape at ``t``."""
    return sum(-w * p / (2 * math.pi) * math.cos(2 * math.pi * t / p + ph) for w, p, ph in _HARMONICS)


def _ripple(t: float) -> float:
    return sum(w * math.sin(2 * math.pi * t / p + ph) for w, p, ph in _HARMONICS)


class ProfiledGPUOptions(TypedDict, total=False):
    """The keyword options every profiled double takes (defaults: ``ProfiledGPU``)."""

    index: int
    uuid: str | None
    time_fn: Callable[[], float]
    privileged: bool


class ProfiledGPU(GPU):
    """What the profile-driven doubles share: one workload's measured points, identity, privilege,
    the log of setter calls, fault injection and the clock ladder.

    A subclass sets ``_max_clock_mhz`` and says how its default UUID is named (``_uuid_name``).
    """

    _max_clock_mhz: int
    _energy_counter: bool = True

    def __init__(
        self,
        gpu_model: str,
        workload: str,
        batch_size: int | None,
        *,
        index: int = 0,
        uuid: str | None = None,
        time_fn: Callable[[], float] = time.monotonic,
        privileged: bool = True,
    ) -> None:
        self.profile: GPUProfile = load_gpu_profile(gpu_model)
        """The measured profile of ``gpu_model`` (a built-in name or a CSV path)."""
        self.points: list[ProfilePoint] = self.profile.points(workload, batch_size)  # highest limit first
        self.workload = workload
        self.index = index
        self.uuid = uuid or f"GPU-{uuid_mod.uuid5(uuid_mod.NAMESPACE_URL, self._uuid_name(gpu_model))}"
        self.privileged = privileged
        self._time_fn = time_fn
        self._failure: Exception | None = None
        self.set_calls: list[tuple[str, object]] = []
        """Every setter call that went through, in order, as (call, value)."""

    @abstractmethod
    def _uuid_name(self, gpu_model: str) -> str:
        """The name the default UUID is derived from (``self.profile`` and ``self.index`` are set)."""

    def fail(self, exc: Exception | None) -> None:
        """Make every later call raise ``exc`` (e.g. ``DeviceLostError``), as a lost GPU does; None heals."""
        self._failure = exc

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    @property
    def capabilities(self) -> GPUCapabilities:
        return GPUCapabilities(
            energy_counter=self._energy_counter, power_reading=True, power_limit_control=True, clock_control=True,
            power_limit_permitted=self.privileged, clock_control_permitted=self.privileged,
        )

    def power_limit_constraints(self) -> PowerLimitConstraints:
        top = self.points[0].power_limit_w
        return PowerLimitConstraints(min_w=self.points[-1].power_limit_w, max_w=top, default_w=top)

    def supported_sm_clocks_mhz(self) -> list[int]:
        return list(range(self._max_clock_mhz, _MIN_CLOCK_MHZ - 1, -_CLOCK_STEP_MHZ))

    def utilization_pct(self) -> float:
        self._check()
        return 100.0


class FakeGPU(ProfiledGPU):
    """A profiled GPU: ``FakeGPU("a40", "imagenet/resnet50")`` draws what an A40 drew training ResNet-50.

    ``set_calls`` logs ('set_power_limit_w', 250.0), ('lock_sm_clocks_mhz', (a, b)), ('reset_sm_clocks', None).
    """

    def __init__(
        self,
        gpu_model: str = "a40",
        workload: str = "imagenet/resnet50",
        batch_size: int | None = None,
        *,
        ripple: float = 0.05,
        energy_counter: bool = True,
        draw: PowerDraw | None = None,
        refresh_period_s: float | None = NVML_REFRESH_S,
        call_costs: bool = False,
        **options: Unpack[ProfiledGPUOptions],
    ) -> None:
        super().__init__(gpu_model, workload, batch_size, **options)
        self.gpu_model = self.profile.gpu
        self.name, self.architecture, self._max_clock_mhz = GPU_MODELS.get(
            self.profile.gpu, (self.profile.gpu, "unknown", 1800))
        self.ripple = ripple
        self._energy_counter = energy_counter
        self._lock = threading.Lock()
        self._limit_w = self.points[0].power_limit_w
        self._locked_mhz: tuple[int, int] | None = None
        self.draw = draw
        """Replaces the profile's power (and ignores the power limit) when set."""
        self.refresh_period_s = refresh_period_s
        self.refresh_phase_s = (0.0137 * (self.index + 1)) % (refresh_period_s or 1.0)
        """When in each period the counter refreshes: GPUs of one node do not refresh in step, so a fixed,
        index-dependent phase (set it to line a test up with the refresh)."""
        self.call_costs = call_costs
        self.counter_offset_j = 1.0e6
        """What the counter held at construction: NVML counts from driver load, never from 0 at job start."""
        self.truth_at_counter_read_j: float | None = None
        """The true energy at the moment of the last counter read (to judge a figure built on that read)."""
        # Energy segments, one per power limit in force: (start time, energy at start J, limit W).
        self._segments: list[tuple[float, float, float]] = [(self._time_fn(), 0.0, self._limit_w)]

    def _uuid_name(self, gpu_model: str) -> str:
        return f"greentrain-fake/{self.profile.gpu}/{self.index}"

    # --- simulation helpers -------------------------------------------------------------------

    def reset_failure(self) -> None:
        self._failure = None

    def measured_at(self, limit_w: float) -> tuple[float, float]:
        """(average power W, time per epoch s) at ``limit_w``, linear between the profile's measured limits:
        the truth the fake's readings follow."""
        point = interpolate(self.points, limit_w)
        return point.average_power_w, point.time_per_epoch_s

    def base_power_w(self) -> float:
        """Profile power at the current limit, without ripple."""
        return self.measured_at(self._limit_w)[0]

    def relative_speed(self) -> float:
        """t_epoch(max limit) / t_epoch(current limit): 1.0 at full power, < 1 when capped."""
        return self.points[0].time_per_epoch_s / self.measured_at(self._limit_w)[1]

    def step_time_s(self, base_step_s: float) -> float:
        """How long a step that takes ``base_step_s`` at full power takes at the current limit."""
        return base_step_s / self.relative_speed()

    def _segment_energy_j(self, limit_w: float, t0: float, t1: float) -> float:
        if self.draw is not None:
            return self.draw.energy_j(t0, t1)
        base_w = self.measured_at(limit_w)[0]
        return base_w * ((t1 - t0) + self.ripple * (_ripple_integral(t1) - _ripple_integral(t0)))

    def _energy_at(self, t: float) -> float:
        """Exact energy from construction to ``t`` (caller holds the lock)."""
        starts = [seg[0] for seg in self._segments]
        start_t, before_j, limit_w = self._segments[max(0, bisect.bisect_right(starts, t) - 1)]
        return before_j + self._segment_energy_j(limit_w, start_t, t)

    def _instant_power_w(self, t: float) -> float:
        if self.draw is not None:
            return self.draw.power_w(t)
        return self.base_power_w() * (1.0 + self.ripple * _ripple(t))

    def _last_refresh_t(self, t: float) -> float:
        period, phase = self.refresh_period_s or 0.0, self.refresh_phase_s
        return phase + math.floor((t - phase) / period) * period

    def _spend(self, nvml_function: str) -> None:
        if self.call_costs:
            spend_cpu_s(NVML_CALL_COST_S.get(nvml_function, 0.0))

    def true_energy_j(self) -> float:
        """Exact integral of the power since construction (ground truth, even without a counter)."""
        with self._lock:
            return self._energy_at(self._time_fn())

    # --- GPU interface ------------------------------------------------------------------------

    def total_energy_j(self) -> float:
        """The counter: ``counter_offset_j`` + exact energy up to its last refresh (up to ``refresh_period_s`` old)."""
        self._check()
        if not self._energy_counter:
            raise NotSupportedError(f"GPU {self.index} ({self.uuid}): no total-energy counter; integrate power_w()")
        self._spend("nvmlDeviceGetTotalEnergyConsumption")
        with self._lock:
            t = self._time_fn()
            self.truth_at_counter_read_j = self._energy_at(t)
            return self.counter_offset_j + self._energy_at(self._last_refresh_t(t) if self.refresh_period_s else t)

    def power_w(self) -> float:
        """Board power: the average over the last refresh period (instantaneous when not refreshing)."""
        self._check()
        self._spend("nvmlDeviceGetFieldValues")
        with self._lock:
            t = self._time_fn()
            if not self.refresh_period_s:
                return self._instant_power_w(t)
            tick = self._last_refresh_t(t)
            return (self._energy_at(tick) - self._energy_at(tick - self.refresh_period_s)) / self.refresh_period_s

    def power_limit_w(self) -> float:
        self._check()
        self._spend("nvmlDeviceGetEnforcedPowerLimit")
        return self._limit_w

    def power_limit_constraints(self) -> PowerLimitConstraints:
        self._check()
        return super().power_limit_constraints()

    def set_power_limit_w(self, power_limit_w: float) -> None:
        self._check()
        limits = self.power_limit_constraints()
        if not limits.min_w <= power_limit_w <= limits.max_w:
            raise ConfigError(
                f"GPU {self.index}: power limit {power_limit_w:g} W is outside the allowed range "
                f"{limits.min_w:g}-{limits.max_w:g} W"
            )
        if not self.privileged:
            raise PrivilegeError(f"GPU {self.index}: set_power_limit_w needs root privileges; {PRIVILEGE_FIX}")
        with self._lock:
            now = self._time_fn()  # a new energy segment at the new limit
            self._segments.append((now, self._energy_at(now), float(power_limit_w)))
            del self._segments[:-16]  # the counter looks back at most one refresh period
            self._limit_w = float(power_limit_w)
        self.set_calls.append(("set_power_limit_w", float(power_limit_w)))

    def supported_sm_clocks_mhz(self) -> list[int]:
        self._check()
        return super().supported_sm_clocks_mhz()

    def sm_clock_mhz(self) -> int:
        self._check()
        self._spend("nvmlDeviceGetClockInfo")
        # A power cap lowers the clock roughly with speed; a lock caps it.
        natural = int(self._max_clock_mhz * self.relative_speed())
        return min(natural, self._locked_mhz[1]) if self._locked_mhz else natural

    def locked_sm_clocks_mhz(self) -> tuple[int, int] | None:
        """The current lock, or None."""
        return self._locked_mhz

    def lock_sm_clocks_mhz(self, min_mhz: int, max_mhz: int) -> None:
        self._check()
        clocks = self.supported_sm_clocks_mhz()
        if not min(clocks) <= min_mhz <= max_mhz <= max(clocks):
            raise ConfigError(
                f"GPU {self.index}: SM clock range {min_mhz}-{max_mhz} MHz is invalid; "
                f"need min <= max within {min(clocks)}-{max(clocks)} MHz"
            )
        if not self.privileged:
            raise PrivilegeError(f"GPU {self.index}: lock_sm_clocks_mhz needs root privileges; {PRIVILEGE_FIX}")
        self._locked_mhz = (int(min_mhz), int(max_mhz))
        self.set_calls.append(("lock_sm_clocks_mhz", self._locked_mhz))

    def reset_sm_clocks(self) -> None:
        self._check()
        if not self.privileged:
            raise PrivilegeError(f"GPU {self.index}: reset_sm_clocks needs root privileges; {PRIVILEGE_FIX}")
        self._locked_mhz = None
        self.set_calls.append(("reset_sm_clocks", None))

    def temperature_c(self) -> float:
        self._check()
        return round(30.0 + 0.15 * self._instant_power_w(self._time_fn()), 1)

    def throttle_reasons(self) -> list[str]:
        self._check()
        reasons = []
        if self._limit_w < self.points[0].power_limit_w:
            reasons.append("sw_power_cap")
        if self._locked_mhz is not None:
            reasons.append("applications_clocks_setting")
        return reasons

    def __repr__(self) -> str:
        return f"FakeGPU({self.gpu_model!r}, {self.workload!r}, index={self.index}, power_limit_w={self._limit_w:g})"
