"""Translate NVML error codes into greentrain's exception tree, in one place.

Every NVML call in ``nvml.py`` goes through ``translate_nvml_error``, so a
caller only ever sees ``greentrain.errors`` types whose message names the GPU,
the operation and the fix. The original ``NVMLError`` stays attached as
``__cause__`` for debugging.
"""

from __future__ import annotations

from typing import Protocol

from greentrain.errors import (
    ConfigError,
    DeviceError,
    DeviceLostError,
    DeviceNotFoundError,
    NotSupportedError,
    PrivilegeError,
)

__all__ = ["translate_nvml_error", "PRIVILEGE_FIX", "NVMLLibrary"]


class NVMLLibrary(Protocol):
    """pynvml, or a stand-in with its functions and constants (``greentrain.testing.FakeNVML``)."""

    NVMLError: type[Exception]
    NVML_CLOCK_SM: int
    NVML_TEMPERATURE_GPU: int
    NVML_DEVICE_MIG_ENABLE: int

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int: ...

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...

    def nvmlSystemGetDriverVersion(self) -> str | bytes: ...

PRIVILEGE_FIX = "run as root, or start `sudo greentrain daemon` and let it apply GPU settings for unprivileged jobs"


def _code_name(error: BaseException, code: object) -> str:
    """'NVMLError_GpuIsLost, code 15': pynvml's own subclass name for the code."""
    return f"{type(error).__name__}, code {code}"


def translate_nvml_error(nvml: NVMLLibrary, error: BaseException, device: str, operation: str) -> Exception:
    """Return the greentrain exception for an ``NVMLError`` raised by ``operation`` on ``device``."""
    code = getattr(error, "value", None)
    where = f"{device}: {operation}"
    detail = f"(NVML: {error}; {_code_name(error, code)})"

    def is_(*names: str) -> bool:
        return any(getattr(nvml, n, object()) == code for n in names)

    if is_("NVML_ERROR_NO_PERMISSION"):
        return PrivilegeError(f"{where} needs root privileges {detail}; {PRIVILEGE_FIX}")
    if is_("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND"):
        return NotSupportedError(f"{where} is not supported by this GPU or driver {detail}")
    if is_("NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_RESET_REQUIRED", "NVML_ERROR_GPU_NOT_FOUND"):
        return DeviceLostError(
            f"{where}: the GPU stopped answering {detail}; check `nvidia-smi` and the kernel log (dmesg), "
            "the GPU may need a reset or a reboot"
        )
    if is_("NVML_ERROR_INVALID_ARGUMENT"):
        return ConfigError(f"{where}: the driver rejected the value {detail}; check it against `greentrain doctor`")
    if is_("NVML_ERROR_NOT_FOUND"):
        return DeviceNotFoundError(f"{where}: no such device {detail}; list GPUs with `greentrain doctor`")
    if is_("NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_LIB_RM_VERSION_MISMATCH"):
        return DeviceError(f"{where}: the NVIDIA driver is not usable {detail}; install or reload the driver")
    if is_("NVML_ERROR_UNINITIALIZED"):
        return DeviceError(
            f"{where}: NVML is not initialised {detail}; create devices through greentrain.device.discover()"
        )
    if is_("NVML_ERROR_INSUFFICIENT_POWER"):
        return DeviceError(f"{where} {detail}; check the GPU's external power cables")
    return DeviceError(f"{where} failed {detail}")
