"""The pynvml double speaks pynvml: its errors and structures are pynvml's own."""

from __future__ import annotations

import pynvml
import pytest

from greentrain.testing import fake_nvml
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

pytestmark = pytest.mark.timeout(10)


def test_lazy_module_attribute() -> None:
    import greentrain.testing

    assert greentrain.testing.fake_nvml is fake_nvml


def test_uses_pynvml_error_classes_and_constants() -> None:
    nvml = FakeNVML([FakeNVMLDevice()])
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    assert nvml.NVML_ERROR_GPU_IS_LOST == pynvml.NVML_ERROR_GPU_IS_LOST and nvml.NVMLError is pynvml.NVMLError
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByIndex(5)
    nvml.inject_error("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NO_PERMISSION, times=2)
    for _ in range(2):
        with pytest.raises(pynvml.NVMLError_NoPermission):
            nvml.nvmlDeviceGetPowerUsage(handle)
    assert nvml.nvmlDeviceGetPowerUsage(handle) > 0


def test_field_values_are_real_ctypes_structures() -> None:
    nvml = FakeNVML([FakeNVMLDevice(power_fields=False)])
    nvml.nvmlInit()
    values = nvml.nvmlDeviceGetFieldValues(nvml.nvmlDeviceGetHandleByIndex(0), [pynvml.NVML_FI_DEV_POWER_INSTANT])
    assert isinstance(values[0], pynvml.c_nvmlFieldValue_t)
    assert values[0].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
