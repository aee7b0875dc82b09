"""ActuatorSet over the real NVML vendor module (driven by the fake pynvml): error codes become refusals."""

from __future__ import annotations

import logging
from pathlib import Path

import pynvml
import pytest

from greentrain.actuators import ActuatorSet, Journal, Knob
from greentrain.testing import FileBackedGPU
from greentrain.device.base import GPUCapabilities
from greentrain.device.discovery import discover
from greentrain.policies.base import Decision
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

pytestmark = pytest.mark.timeout(20)


def _nvml_gpus() -> tuple[FakeNVML, list]:
    nvml = FakeNVML([FakeNVMLDevice("a40"), FakeNVMLDevice("a40")])
    devices = discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False)
    assert len(devices.gpus) == 2
    return nvml, devices.gpus


def test_nvml_set_and_restore(tmp_path: Path) -> None:
    nvml, gpus = _nvml_gpus()
    with ActuatorSet(gpus, state_dir=tmp_path, install_hooks=False) as acts:
        assert acts.apply(Decision(power_limit_w=200.0, sm_clocks_mhz=(900, 1200))) == ["power_limit", "sm_clocks"]
        assert [g.power_limit_w() for g in gpus] == [200.0, 200.0]
        assert nvml.gpus[0].locked_sm_clocks_mhz() == (900, 1200)
    assert [g.power_limit_w() for g in gpus] == [300.0, 300.0]
    assert all(fake.locked_sm_clocks_mhz() is None for fake in nvml.gpus)


def test_nvml_no_permission_is_refused_with_fix(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    nvml, gpus = _nvml_gpus()
    nvml.inject_error("nvmlDeviceSetPowerManagementLimit", pynvml.NVML_ERROR_NO_PERMISSION)
    with ActuatorSet(gpus, state_dir=tmp_path, install_hooks=False) as acts:
        with caplog.at_level(logging.WARNING):
            assert acts.apply(Decision(power_limit_w=200.0)) == []
        assert acts.refused_total["power_limit"] == 2
        assert "greentrain daemon" in caplog.text
        assert all(Journal(tmp_path, g.uuid).entries() == {} for g in gpus)


def test_nvml_gpu_lost_mid_change(tmp_path: Path) -> None:
    nvml, gpus = _nvml_gpus()
    with ActuatorSet(gpus, state_dir=tmp_path, install_hooks=False) as acts:
        acts.apply(Decision(power_limit_w=250.0))
        nvml.lose_gpu(1)
        assert acts.apply(Decision(power_limit_w=200.0)) == ["power_limit"]  # GPU 0 still changes
        assert acts.refused_total["power_limit"] == 1
        assert gpus[0].power_limit_w() == 200.0
    assert gpus[0].power_limit_w() == 300.0
    assert Knob.POWER_LIMIT in Journal(tmp_path, gpus[1].uuid).entries()  # kept for the next start


def test_device_without_clock_control_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class NoClocks(FileBackedGPU):
        @property
        def capabilities(self) -> GPUCapabilities:
            return GPUCapabilities(energy_counter=True, power_reading=True, power_limit_control=True, clock_control=False)

    gpu = NoClocks(tmp_path / "gpu.json", "a40")
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        assert acts.apply(Decision(sm_clocks_mhz=(900, 1200))) == []
        assert "SM clocks cannot be locked on this device" in caplog.text
        assert gpu.set_calls == []
