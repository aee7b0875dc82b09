"""NVIDIA GPUs through NVML (``pynvml`` from nvidia-ml-py, imported lazily: an optional extra).

Energy: the total-energy counter (mJ since driver load, Volta and newer) when
the GPU has one; otherwise callers integrate ``power_w`` samples (the
monitor does) — never a silent 0 J. Power prefers the instant field
(``NVML_FI_DEV_POWER_INSTANT``), then the averaged field, then
``nvmlDeviceGetPowerUsage`` (a 1 s average on recent GPUs). Every NVML error
goes through ``NVMLGPU._call``, which translates it with
``translate_nvml_error``.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import replace
from typing import Any

from greentrain.device.base import GPU, GPUCapabilities, PowerLimitConstraints
from greentrain.device.nvml_errors import NVMLLibrary, translate_nvml_error
from greentrain.errors import ConfigError, NotSupportedError, PrivilegeError

__all__ = ["NVMLGPU", "load_pynvml", "ARCHITECTURES", "THROTTLE_REASONS"]

# NVML_DEVICE_ARCH_* values -> names (stable in the NVML ABI).
ARCHITECTURES = {
    2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing", 7: "ampere",
    8: "ada", 9: "hopper", 10: "blackwell", 13: "rubin",
}  # fmt: skip
_PRE_VOLTA = ("kepler", "maxwell", "pascal")

# nvmlClocksEventReason* bits -> short names.
THROTTLE_REASONS = {
    0x001: "gpu_idle", 0x002: "applications_clocks_setting", 0x004: "sw_power_cap", 0x008: "hw_slowdown",
    0x010: "sync_boost", 0x020: "sw_thermal_slowdown", 0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}  # fmt: skip

_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _is_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return geteuid is None or geteuid() == 0  # no euid (Windows): let the probe decide


def load_pynvml() -> NVMLLibrary:
    """Import pynvml; ImportError carries the install hint."""
    try:
        import pynvml
    except ImportError:
        raise ImportError(
            "nvidia-ml-py is not installed; `pip install 'greentrain[nvidia]'` to measure NVIDIA GPUs"
        ) from None
    return pynvml


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _field_value(field: ctypes.Structure) -> float:
    return float(getattr(field.value, _VALUE_FIELDS.get(int(field.valueType), "uiVal")))


class NVMLGPU(GPU):
    """One physical NVIDIA GPU. ``nvml`` is pynvml (or the testing double), already initialised."""

    def __init__(self, nvml: NVMLLibrary, handle: object, index: int) -> None:
        self._nvml = nvml
        self._handle = handle
        self.index = index
        self.label = f"GPU {index}"
        self.name = _text(self._call("nvmlDeviceGetName"))
        self.uuid = _text(self._call("nvmlDeviceGetUUID"))
        self.label = f"GPU {index} ({self.uuid})"
        self.architecture = self._read_architecture()
        self._lock = threading.Lock()
        self._caps: GPUCapabilities | None = None
        self._clocks_mhz: list[int] | None = None
        self.power_field = self._probe_power_field()
        """Which reading ``power_w`` uses: 'instant', 'average', 'usage' or None (no power reading)."""

    # --- identity -------------------------------------------------------------------------------

    def _read_architecture(self) -> str:
        try:
            code = self._call("nvmlDeviceGetArchitecture")
        except NotSupportedError:
            return "unknown"
        return ARCHITECTURES.get(int(code), "unknown")

    def _call(self, function: str, *args: object) -> Any:
        """Call ``nvml.<function>(handle, *args)``, translating NVMLError into greentrain's tree.

        Any: pynvml is untyped and each function returns its own ctypes value (int, list, struct)."""
        call = getattr(self._nvml, function, None)
        if call is None:  # an older nvidia-ml-py without this binding
            raise NotSupportedError(f"{self.label}: {function} is missing from this nvidia-ml-py; upgrade it")
        try:
            return call(self._handle, *args)
        except self._nvml.NVMLError as e:
            raise translate_nvml_error(self._nvml, e, self.label, function) from e

    def mig_enabled(self) -> bool:
        """Whether MIG mode is currently on (then power is shared by slices and not attributable)."""
        try:
            current, _pending = self._call("nvmlDeviceGetMigMode")
        except NotSupportedError:
            return False
        return int(current) == int(self._nvml.NVML_DEVICE_MIG_ENABLE)

    # --- capabilities ---------------------------------------------------------------------------

    def _supports(self, function: str, *args: object) -> bool:
        try:
            self._call(function, *args)
        except NotSupportedError:
            return False
        except PrivilegeError:
            return True
        return True

    def _probe_power_field(self) -> str | None:
        names = (("instant", "NVML_FI_DEV_POWER_INSTANT"), ("average", "NVML_FI_DEV_POWER_AVERAGE"))
        for label, attr in names:
            field_id = getattr(self._nvml, attr, None)
            if field_id is None:
                continue
            try:
                values = self._call("nvmlDeviceGetFieldValues", [field_id])
            except NotSupportedError:
                break  # old driver without field values at all
            if int(values[0].nvmlReturn) == 0:
                return label
        return "usage" if self._supports("nvmlDeviceGetPowerUsage") else None

    def _probe_power_limit_permission(self) -> bool | None:
        """Re-apply the current limit (a change to the same value): the only reliable privilege test NVML offers."""
        try:
            current_mw = self._call("nvmlDeviceGetPowerManagementLimit")
            self._call("nvmlDeviceSetPowerManagementLimit", current_mw)
        except PrivilegeError:
            return False
        except Exception:
            return None
        return True

    def probe_privileges(self) -> GPUCapabilities:
        """Settle ``*_permitted`` by a same-value power-limit write (``doctor`` does; the monitor never writes)."""
        caps = self.capabilities
        if not caps.power_limit_control:
            return caps
        permitted = self._probe_power_limit_permission()
        with self._lock:
            self._caps = replace(
                caps,
                power_limit_permitted=permitted,
                # Locking clocks needs the same privilege (root) as setting the power limit.
                clock_control_permitted=permitted if caps.clock_control else None,
            )
            return self._caps

    @property
    def capabilities(self) -> GPUCapabilities:
        with self._lock:
            if self._caps is None:
                self._caps = self._probe_capabilities()
            return self._caps

    def _probe_capabilities(self) -> GPUCapabilities:
        """Read-only probes. NVML setters need root, so a non-root process is 'not permitted';
        as root the answer stays None (unknown) until ``probe_privileges`` tries."""
        # The energy counter and locked clocks exist from Volta on; unknown (newer) names are probed.
        volta_plus = self.architecture not in _PRE_VOLTA
        energy = volta_plus and self._supports("nvmlDeviceGetTotalEnergyConsumption")
        limit_control = self._supports("nvmlDeviceGetPowerManagementLimitConstraints")
        clock_control = volta_plus and self._supports("nvmlDeviceGetSupportedMemoryClocks")
        permitted = None if _is_root() else False
        return GPUCapabilities(
            energy_counter=energy,
            power_reading=self.power_field is not None,
            power_limit_control=limit_control,
            clock_control=clock_control,
            power_limit_permitted=permitted if limit_control else None,
            clock_control_permitted=permitted if clock_control else None,
        )

    # --- energy and power -----------------------------------------------------------------------

    def total_energy_j(self) -> float:
        if not self.capabilities.energy_counter:
            raise NotSupportedError(
                f"{self.label}: no total-energy counter ({self.architecture}); integrate power_w() samples instead"
            )
        return float(self._call("nvmlDeviceGetTotalEnergyConsumption")) / 1000.0

    def power_w(self) -> float:
        if self.power_field in ("instant", "average"):
            attr = "NVML_FI_DEV_POWER_INSTANT" if self.power_field == "instant" else "NVML_FI_DEV_POWER_AVERAGE"
            field = self._call("nvmlDeviceGetFieldValues", [getattr(self._nvml, attr)])[0]
            if int(field.nvmlReturn) == 0:
                return _field_value(field) / 1000.0
        if self.power_field is None:
            raise NotSupportedError(f"{self.label}: board power cannot be read on this GPU or driver")
        return float(self._call("nvmlDeviceGetPowerUsage")) / 1000.0

    def power_limit_w(self) -> float:
        return float(self._call("nvmlDeviceGetEnforcedPowerLimit")) / 1000.0

    def power_limit_constraints(self) -> PowerLimitConstraints:
        min_mw, max_mw = self._call("nvmlDeviceGetPowerManagementLimitConstraints")
        default_mw = self._call("nvmlDeviceGetPowerManagementDefaultLimit")
        return PowerLimitConstraints(min_w=min_mw / 1000.0, max_w=max_mw / 1000.0, default_w=default_mw / 1000.0)

    def set_power_limit_w(self, power_limit_w: float) -> None:
        limits = self.power_limit_constraints()
        if not limits.min_w <= power_limit_w <= limits.max_w:
            raise ConfigError(
                f"{self.label}: power limit {power_limit_w:g} W is outside the allowed range "
                f"{limits.min_w:g}-{limits.max_w:g} W"
            )
        self._call("nvmlDeviceSetPowerManagementLimit", round(power_limit_w * 1000))

    # --- clocks -----------------------------------------------------------------------------------

    def supported_sm_clocks_mhz(self) -> list[int]:
        if self._clocks_mhz is None:
            top_memory_mhz = max(self._call("nvmlDeviceGetSupportedMemoryClocks"))
            clocks = self._call("nvmlDeviceGetSupportedGraphicsClocks", top_memory_mhz)
            self._clocks_mhz = sorted({int(c) for c in clocks}, reverse=True)
        return list(self._clocks_mhz)

    def sm_clock_mhz(self) -> int:
        return int(self._call("nvmlDeviceGetClockInfo", self._nvml.NVML_CLOCK_SM))

    def lock_sm_clocks_mhz(self, min_mhz: int, max_mhz: int) -> None:
        clocks = self.supported_sm_clocks_mhz()
        low, high = min(clocks), max(clocks)
        if not (low <= min_mhz <= max_mhz <= high):
            raise ConfigError(
                f"{self.label}: SM clock range {min_mhz}-{max_mhz} MHz is invalid; "
                f"need min <= max within the supported {low}-{high} MHz"
            )
        self._call("nvmlDeviceSetGpuLockedClocks", int(min_mhz), int(max_mhz))

    def reset_sm_clocks(self) -> None:
        self._call("nvmlDeviceResetGpuLockedClocks")

    # --- health -----------------------------------------------------------------------------------

    def utilization_pct(self) -> float:
        return float(self._call("nvmlDeviceGetUtilizationRates").gpu)

    def temperature_c(self) -> float:
        return float(self._call("nvmlDeviceGetTemperature", self._nvml.NVML_TEMPERATURE_GPU))

    def throttle_reasons(self) -> list[str]:
        try:
            mask = self._call("nvmlDeviceGetCurrentClocksEventReasons")
        except NotSupportedError:
            mask = self._call("nvmlDeviceGetCurrentClocksThrottleReasons")  # drivers before 535
        return [name for bit, name in THROTTLE_REASONS.items() if int(mask) & bit]

    def __repr__(self) -> str:
        return f"NVMLGPU(index={self.index}, name={self.name!r}, uuid={self.uuid!r})"
