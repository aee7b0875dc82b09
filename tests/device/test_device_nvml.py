"""NVMLGPU against the pynvml-level double: real pynvml error classes, real ctypes structures."""

from __future__ import annotations

import pynvml
import pytest

from greentrain.device import discover
from greentrain.device.nvml import NVMLGPU
from greentrain.errors import (
    ConfigError,
    DeviceError,
    DeviceLostError,
    DeviceNotFoundError,
    NotSupportedError,
    PrivilegeError,
)
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

pytestmark = pytest.mark.timeout(20)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _gpus(*devices: FakeNVMLDevice, cvd: str | None = None) -> tuple[FakeNVML, list[NVMLGPU]]:
    nvml = FakeNVML(devices)
    found = discover(cvd, nvml=nvml, rapl_root=None, estimate_cpu=False)
    return nvml, found.gpus  # type: ignore[return-value]


def test_identity_and_capabilities_of_a_volta_plus_gpu() -> None:
    _, (gpu,) = _gpus(FakeNVMLDevice("a40"))
    assert (gpu.name, gpu.architecture) == ("NVIDIA A40", "ampere")
    assert gpu.uuid.startswith("GPU-")
    caps = gpu.capabilities
    assert caps.energy_counter and caps.power_reading and caps.power_limit_control and caps.clock_control
    caps = gpu.probe_privileges()
    assert caps.power_limit_permitted is True and caps.clock_control_permitted is True
    assert gpu.capabilities == caps
    assert gpu.power_field == "instant"


def test_energy_counter_is_converted_from_millijoules() -> None:
    clock = Clock()
    nvml, (gpu,) = _gpus(FakeNVMLDevice("v100", time_fn=clock, refresh_period_s=None))  # continuous counter
    start_j = gpu.total_energy_j()
    clock.t += 10.0
    truth_j = nvml.gpus[0].true_energy_j()
    assert gpu.total_energy_j() - start_j == pytest.approx(truth_j, abs=2e-3)  # mJ resolution
    assert truth_j > 10.0 * 100  # a V100 training ResNet draws well over 100 W


def test_no_counter_raises_not_supported_never_zero() -> None:
    _, (gpu,) = _gpus(FakeNVMLDevice("a40", energy_counter=False))
    assert gpu.capabilities.energy_counter is False
    with pytest.raises(NotSupportedError, match="integrate power_w"):
        gpu.total_energy_j()


def test_pre_volta_gpu_does_not_claim_counter_or_clock_control() -> None:
    _, (gpu,) = _gpus(FakeNVMLDevice("v100", architecture="pascal"))
    caps = gpu.capabilities
    assert caps.energy_counter is False and caps.clock_control is False and caps.power_reading is True


def test_capabilities_never_write_and_non_root_is_not_permitted(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml, (gpu,) = _gpus(FakeNVMLDevice("a40"))
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    caps = gpu.capabilities
    assert caps.power_limit_permitted is False and caps.clock_control_permitted is False
    assert not any(name.startswith("nvmlDeviceSet") for name, _i, _a in nvml.calls)
    assert nvml.gpus[0].set_calls == []


def test_power_prefers_instant_field_else_power_usage() -> None:
    nvml, (fields, usage) = _gpus(FakeNVMLDevice("a40"), FakeNVMLDevice("a40", power_fields=False))
    assert fields.power_field == "instant" and usage.power_field == "usage"
    nvml.calls.clear()
    assert 100 < fields.power_w() < 320 and 100 < usage.power_w() < 320
    called = [name for name, _index, _args in nvml.calls]
    assert called == ["nvmlDeviceGetFieldValues", "nvmlDeviceGetPowerUsage"]


def test_power_limit_get_set_and_range_check() -> None:
    nvml, (gpu,) = _gpus(FakeNVMLDevice("a40"))
    limits = gpu.power_limit_constraints()
    assert (limits.min_w, limits.max_w, limits.default_w) == (100.0, 300.0, 300.0)
    gpu.set_power_limit_w(175)
    assert gpu.power_limit_w() == 175.0 and nvml.gpus[0].power_limit_w() == 175.0
    assert "sw_power_cap" in gpu.throttle_reasons()
    with pytest.raises(ConfigError, match=r"350 W is outside the allowed range 100-300 W"):
        gpu.set_power_limit_w(350)
    gpu.reset_power_limit()
    assert gpu.power_limit_w() == 300.0


def test_unprivileged_process_is_told_how_to_fix_it() -> None:
    _nvml, (gpu,) = _gpus(FakeNVMLDevice("a40", privileged=False))
    caps = gpu.probe_privileges()
    assert caps.power_limit_permitted is False and caps.clock_control_permitted is False
    with pytest.raises(PrivilegeError, match="run as root.*greentrain daemon"):
        gpu.set_power_limit_w(200)
    with pytest.raises(PrivilegeError):
        gpu.lock_sm_clocks_mhz(900, 1200)


def test_clocks_supported_lock_and_reset() -> None:
    nvml, (gpu,) = _gpus(FakeNVMLDevice("a40"))
    clocks = gpu.supported_sm_clocks_mhz()
    assert clocks == sorted(clocks, reverse=True) and clocks[0] == 1740
    gpu.lock_sm_clocks_mhz(900, 1200)
    assert gpu.sm_clock_mhz() == 1200
    assert nvml.gpus[0].locked_sm_clocks_mhz() == (900, 1200)
    with pytest.raises(ConfigError, match="1300-1200 MHz is invalid"):
        gpu.lock_sm_clocks_mhz(1300, 1200)
    gpu.reset_sm_clocks()
    assert nvml.gpus[0].locked_sm_clocks_mhz() is None and gpu.sm_clock_mhz() == 1740


def test_health_readings() -> None:
    _, (gpu,) = _gpus(FakeNVMLDevice("rtx6000"))
    assert gpu.utilization_pct() == 100.0
    assert 30 < gpu.temperature_c() < 90
    assert gpu.throttle_reasons() == []


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (pynvml.NVML_ERROR_NO_PERMISSION, PrivilegeError),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, NotSupportedError),
        (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, NotSupportedError),
        (pynvml.NVML_ERROR_GPU_IS_LOST, DeviceLostError),
        (pynvml.NVML_ERROR_RESET_REQUIRED, DeviceLostError),
        (pynvml.NVML_ERROR_GPU_NOT_FOUND, DeviceLostError),
        (pynvml.NVML_ERROR_INVALID_ARGUMENT, ConfigError),
        (pynvml.NVML_ERROR_NOT_FOUND, DeviceNotFoundError),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, DeviceError),
        (pynvml.NVML_ERROR_UNINITIALIZED, DeviceError),
        (pynvml.NVML_ERROR_INSUFFICIENT_POWER, DeviceError),
        (pynvml.NVML_ERROR_TIMEOUT, DeviceError),
        (pynvml.NVML_ERROR_UNKNOWN, DeviceError),
    ],
)
def test_every_nvml_error_is_translated(code: int, expected: type[Exception]) -> None:
    nvml, (gpu,) = _gpus(FakeNVMLDevice("a40"))
    nvml.inject_error("nvmlDeviceGetEnforcedPowerLimit", code, times=1)
    with pytest.raises(expected) as info:
        gpu.power_limit_w()
    message = str(info.value)
    assert gpu.uuid in message and "nvmlDeviceGetEnforcedPowerLimit" in message
    assert isinstance(info.value.__cause__, pynvml.NVMLError) and info.value.__cause__.value == code
    if expected is DeviceError:  # the catch-all must not swallow the specific classes
        assert not isinstance(info.value, (PrivilegeError, NotSupportedError, DeviceLostError, ConfigError))
    assert gpu.power_limit_w() == 300.0  # the injected fault was one-off


def test_lost_gpu_raises_device_lost_on_every_call() -> None:
    nvml, (gpu,) = _gpus(FakeNVMLDevice("a40"))
    nvml.lose_gpu(0)
    for call in (gpu.power_w, gpu.total_energy_j, gpu.sm_clock_mhz, gpu.temperature_c):
        with pytest.raises(DeviceLostError, match="stopped answering"):
            call()


def test_older_bindings_fall_back_or_say_not_supported() -> None:
    nvml, (gpu,) = _gpus(FakeNVMLDevice("a40"))
    gpu.set_power_limit_w(200)
    nvml.nvmlDeviceGetCurrentClocksEventReasons = None  # nvidia-ml-py before the clock-event rename
    assert gpu.throttle_reasons() == ["sw_power_cap"]
    assert nvml.calls[-1][0] == "nvmlDeviceGetCurrentClocksThrottleReasons"
    nvml.nvmlDeviceGetTemperature = None
    with pytest.raises(NotSupportedError, match="missing from this nvidia-ml-py"):
        gpu.temperature_c()
