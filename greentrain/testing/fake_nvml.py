"""A pynvml-level double: the functions ``greentrain.device.nvml`` calls, answered from fake GPUs.

It raises the *real* ``pynvml.NVMLError`` subclasses and returns the real
ctypes structures (field values, utilisation), so the translation and parsing
code under test is the production code. Physics (power, energy, limits,
clocks) comes from a ``FakeGPU`` per device, i.e. from measured profiles.
Needs nvidia-ml-py installed (it is in the ``dev`` and ``nvidia`` extras).

It is calibrated to an H100: each call spends the CPU time the real call took
there (``greentrain.testing.costs``; 3.9 ms for the energy counter), and the
counter and power readings refresh every 100 ms. ``FakeNVML(call_costs=False)``
skips the costs for tests that need speed; benchmarks keep them.

    nvml = FakeNVML([FakeNVMLDevice("a40"), FakeNVMLDevice("v100", energy_counter=False)])
    nvml.inject_error("nvmlDeviceGetPowerUsage", nvml.NVML_ERROR_GPU_IS_LOST, index=1)
    devices = greentrain.device.discover(None, nvml=nvml, rapl_root=None)
"""

from __future__ import annotations

import ctypes
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TypeVar

from greentrain.extras import require

require("pynvml", "greentrain.testing's fake NVML")
import pynvml  # noqa: E402 - after the extra's check

from greentrain.testing.costs import NVML_CALL_COST_S, spend_cpu_s
from greentrain.testing.fake_gpu import FakeGPU
from greentrain.testing.load import NVML_REFRESH_S, PowerDraw

__all__ = ["FakeNVML", "FakeNVMLDevice", "h100_node"]

_ARCH_CODES = {"volta": pynvml.NVML_DEVICE_ARCH_VOLTA, "turing": pynvml.NVML_DEVICE_ARCH_TURING,
               "ampere": pynvml.NVML_DEVICE_ARCH_AMPERE, "pascal": pynvml.NVML_DEVICE_ARCH_PASCAL,
               "hopper": pynvml.NVML_DEVICE_ARCH_HOPPER}  # fmt: skip
_MEMORY_CLOCKS_MHZ = [7001, 5001, 810, 405]


@dataclass(eq=False)  # compared and hashed by identity: two devices with the same spec are two GPUs
class FakeNVMLDevice:
    """One physical GPU behind the fake NVML: what it supports and how it draws power."""

    gpu_model: str = "a40"
    workload: str = "imagenet/resnet50"
    _: KW_ONLY
    uuid: str | None = None
    architecture: str | None = None
    energy_counter: bool = True
    power_fields: bool = True
    mig: bool = False
    privileged: bool = True
    time_fn: Callable[[], float] = time.monotonic
    draw: PowerDraw | None = None
    name: str | None = None
    refresh_period_s: float | None = NVML_REFRESH_S
    gpu: FakeGPU | None = field(default=None, init=False)
    """Built by FakeNVML with the device's index."""

    def build(self, index: int) -> FakeGPU:
        self.gpu = FakeGPU(self.gpu_model, self.workload, index=index, uuid=self.uuid, time_fn=self.time_fn,
                           draw=self.draw, refresh_period_s=self.refresh_period_s)
        if self.name is not None:
            self.gpu.name = self.name
        if self.architecture is not None:
            self.gpu.architecture = self.architecture
        return self.gpu


R = TypeVar("R")


def _measured_cost(method: Callable[..., R]) -> Callable[..., R]:
    """The call takes the CPU time it took on the H100 in all, the fake's own work included."""
    cost_s = NVML_CALL_COST_S[method.__name__]

    @functools.wraps(method)
    def call(self: FakeNVML, *args: object) -> R:
        if not self.call_costs:
            return method(self, *args)
        start_s = time.thread_time()
        try:
            return method(self, *args)
        finally:  # an error costs the same: the driver did the work before answering
            spend_cpu_s(cost_s - (time.thread_time() - start_s))

    return call


@dataclass(frozen=True)
class _Handle:
    index: int


@dataclass
class _Injection:
    function: str
    code: int
    index: int | None
    times: int | None


class FakeNVML:
    """Stands in for the ``pynvml`` module; constants and error classes are pynvml's own."""

    def __init__(
        self,
        devices: Sequence[FakeNVMLDevice] = (),
        *,
        init_error: int | None = None,
        driver_version: str = "550.54.15",
        call_costs: bool = True,
    ) -> None:
        self.devices = list(devices)
        self.gpus = [d.build(i) for i, d in enumerate(self.devices)]
        self.init_error = init_error
        self.driver_version = driver_version
        self.initialised = 0
        self.call_costs = call_costs
        """Spend each call's measured H100 CPU cost (off: fast tests)."""
        self.calls: list[tuple[str, int | None, tuple[object, ...]]] = []
        """Every call: (function name, device index or None, extra arguments)."""
        self._injections: list[_Injection] = []
        self._lost: set[int] = set()

    def __getattr__(self, name: str) -> object:
        if name.startswith(("NVML_", "NVMLError", "nvmlClocks", "c_nvml")):
            return getattr(pynvml, name)
        raise AttributeError(name)

    # --- fault injection ------------------------------------------------------------------------

    def inject_error(self, function: str, code: int, *, index: int | None = None, times: int | None = None) -> None:
        """Make ``function`` (on device ``index``, or any) raise NVMLError(code), ``times`` times or forever."""
        self._injections.append(_Injection(function, code, index, times))

    def lose_gpu(self, index: int) -> None:
        """Every later call on device ``index`` raises NVML_ERROR_GPU_IS_LOST."""
        self._lost.add(index)

    def _enter(self, function: str, handle: _Handle | None = None, *args: object) -> None:
        index = handle.index if handle is not None else None
        self.calls.append((function, index, args))
        if function not in ("nvmlInit", "nvmlShutdown") and not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if index is not None and index in self._lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        for inj in self._injections:
            if inj.function == function and inj.index in (None, index) and inj.times != 0:
                if inj.times is not None:
                    inj.times -= 1
                raise pynvml.NVMLError(inj.code)

    def _gpu(self, function: str, handle: _Handle, *args: object) -> FakeGPU:
        """Record and check a per-device call; the device's physics."""
        self._enter(function, handle, *args)
        return self.gpus[handle.index]

    # --- library ----------------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex", None, index)
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    # --- identity ---------------------------------------------------------------------------------

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return self._gpu("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        return self._gpu("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetArchitecture(self, handle: _Handle) -> int:
        gpu = self._gpu("nvmlDeviceGetArchitecture", handle)
        return _ARCH_CODES.get(gpu.architecture, pynvml.NVML_DEVICE_ARCH_UNKNOWN)

    def nvmlDeviceGetMigMode(self, handle: _Handle) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetMigMode", handle)
        if gpu.architecture in ("volta", "turing", "pascal"):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if self.devices[handle.index].mig else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    # --- power and energy -------------------------------------------------------------------------

    @_measured_cost
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: _Handle) -> int:
        gpu = self._gpu("nvmlDeviceGetTotalEnergyConsumption", handle)
        if not self.devices[handle.index].energy_counter:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(gpu.total_energy_j() * 1000)  # refreshed every 100 ms, like the hardware

    @_measured_cost
    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        return int(self._gpu("nvmlDeviceGetPowerUsage", handle).power_w() * 1000)

    @_measured_cost
    def nvmlDeviceGetFieldValues(self, handle: _Handle, field_ids: Sequence[int]) -> ctypes.Array[pynvml.c_nvmlFieldValue_t]:
        gpu = self._gpu("nvmlDeviceGetFieldValues", handle, tuple(field_ids))
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        power_ids = (pynvml.NVML_FI_DEV_POWER_INSTANT, pynvml.NVML_FI_DEV_POWER_AVERAGE)
        for slot, field_id in zip(values, field_ids, strict=True):
            slot.fieldId = field_id
            if field_id in power_ids and self.devices[handle.index].power_fields:
                slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                slot.value.uiVal = int(gpu.power_w() * 1000)
                slot.nvmlReturn = pynvml.NVML_SUCCESS
            else:
                slot.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    @_measured_cost
    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        return int(self._gpu("nvmlDeviceGetEnforcedPowerLimit", handle).power_limit_w() * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, handle: _Handle) -> int:
        return int(self._gpu("nvmlDeviceGetPowerManagementLimit", handle).power_limit_w() * 1000)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: _Handle) -> list[int]:
        limits = self._gpu("nvmlDeviceGetPowerManagementLimitConstraints", handle).power_limit_constraints()
        return [int(limits.min_w * 1000), int(limits.max_w * 1000)]

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: _Handle) -> int:
        limits = self._gpu("nvmlDeviceGetPowerManagementDefaultLimit", handle).power_limit_constraints()
        return int(limits.default_w * 1000)

    def nvmlDeviceSetPowerManagementLimit(self, handle: _Handle, limit_mw: int) -> None:
        gpu = self._gpu("nvmlDeviceSetPowerManagementLimit", handle, limit_mw)
        if not self.devices[handle.index].privileged:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)
        limits = gpu.power_limit_constraints()
        if not limits.min_w * 1000 <= limit_mw <= limits.max_w * 1000:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu.set_power_limit_w(limit_mw / 1000)

    # --- clocks -----------------------------------------------------------------------------------

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: _Handle) -> list[int]:
        self._gpu("nvmlDeviceGetSupportedMemoryClocks", handle)
        return list(_MEMORY_CLOCKS_MHZ)

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: _Handle, memory_mhz: int) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetSupportedGraphicsClocks", handle, memory_mhz)
        if memory_mhz not in _MEMORY_CLOCKS_MHZ:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        clocks = gpu.supported_sm_clocks_mhz()
        return clocks if memory_mhz == max(_MEMORY_CLOCKS_MHZ) else clocks[len(clocks) // 2 :]

    @_measured_cost
    def nvmlDeviceGetClockInfo(self, handle: _Handle, clock_type: int) -> int:
        gpu = self._gpu("nvmlDeviceGetClockInfo", handle, clock_type)
        if clock_type == pynvml.NVML_CLOCK_MEM:
            return max(_MEMORY_CLOCKS_MHZ)
        return gpu.sm_clock_mhz()

    def nvmlDeviceSetGpuLockedClocks(self, handle: _Handle, min_mhz: int, max_mhz: int) -> None:
        gpu = self._gpu("nvmlDeviceSetGpuLockedClocks", handle, min_mhz, max_mhz)
        if not self.devices[handle.index].privileged:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)
        gpu.lock_sm_clocks_mhz(min_mhz, max_mhz)

    def nvmlDeviceResetGpuLockedClocks(self, handle: _Handle) -> None:
        gpu = self._gpu("nvmlDeviceResetGpuLockedClocks", handle)
        if not self.devices[handle.index].privileged:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)
        gpu.reset_sm_clocks()

    # --- health -----------------------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> pynvml.c_nvmlUtilization_t:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        return pynvml.c_nvmlUtilization_t(gpu=int(gpu.utilization_pct()), memory=40)

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        return int(self._gpu("nvmlDeviceGetTemperature", handle, sensor).temperature_c())

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: _Handle) -> int:
        return _reason_bits(self._gpu("nvmlDeviceGetCurrentClocksEventReasons", handle))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: _Handle) -> int:
        return _reason_bits(self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", handle))


def _reason_bits(gpu: FakeGPU) -> int:
    bits = {"sw_power_cap": pynvml.nvmlClocksEventReasonSwPowerCap,
            "applications_clocks_setting": pynvml.nvmlClocksEventReasonApplicationsClocksSetting}  # fmt: skip
    return sum(bits[r] for r in gpu.throttle_reasons())


def h100_node(
    count: int = 8,
    *,
    time_fn: Callable[[], float] = time.monotonic,
    call_costs: bool = True,
    period_s: float = 0.37,
    duty: float = 0.6,
) -> FakeNVML:
    """A node of ``count`` GPUs calibrated to the H100 measurements: call costs, 100 ms refresh, H100 power.

    Each GPU runs a training-like ``h100_wave`` (bf16 training power while
    busy, the after-load draw in between) with its own phase, so the waves do
    not line up with each other or with the 100 ms refresh. Power-limit range
    and clocks still come from the A40 profile (no H100 power-limit profile
    was measured).
    """
    from greentrain.testing.load import h100_wave

    devices = [
        FakeNVMLDevice("a40", time_fn=time_fn, architecture="hopper", name="NVIDIA H100 80GB HBM3",
                       draw=h100_wave(period_s, duty, phase_s=0.071 * i))  # fmt: skip
        for i in range(count)
    ]
    return FakeNVML(devices, call_costs=call_costs, driver_version="580.159.04")
