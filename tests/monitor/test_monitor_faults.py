"""Counter and power faults: a figure is labelled or the device failed, never a silent 0 J."""

from __future__ import annotations

import pynvml
import pytest

from greentrain.device import discover
from greentrain.monitor import Monitor
from greentrain.provenance import Source
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice, h100_node

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _drive(monitor: Monitor, clock: Clock, seconds: float) -> None:
    for _ in range(round(seconds / 0.1)):
        clock.t += 0.1
        monitor.sample()


def _monitor(nvml: FakeNVML, clock: Clock):  # type: ignore[no-untyped-def]
    devices = discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False)
    return devices, Monitor.from_devices(devices, time_fn=clock, anchor_interval_s=2.0).start(background=False)


@pytest.mark.parametrize("jump_j", [-5.0e5, -1.0e6], ids=["backwards", "wrapped to zero"])
def test_a_counter_that_goes_backwards_is_bridged_by_power_and_labelled_integrated(jump_j: float) -> None:
    clock = Clock()
    nvml = h100_node(1, time_fn=clock, call_costs=False)
    devices, monitor = _monitor(nvml, clock)
    truth0 = nvml.gpus[0].true_energy_j()
    _drive(monitor, clock, 3.0)
    nvml.gpus[0].counter_offset_j += jump_j  # a driver reload resets the counter; a wrap looks the same
    _drive(monitor, clock, 10.0)
    monitor.stop()
    (reading,) = monitor.readings()
    truth_j = nvml.gpus[0].true_energy_j() - truth0
    assert not reading.failed and reading.source is Source.INTEGRATED
    assert reading.energy_j == pytest.approx(truth_j, rel=0.02)  # the lost interval came from power, not 0 J
    assert any("went backwards" in note for note in monitor.notes)
    devices.close()


def test_power_missing_mid_run_on_a_counter_gpu_keeps_totals_measured() -> None:
    clock = Clock()
    nvml = h100_node(1, time_fn=clock, call_costs=False)
    devices, monitor = _monitor(nvml, clock)
    truth0 = nvml.gpus[0].true_energy_j()
    monitor.begin("w")
    _drive(monitor, clock, 10.0)
    for function in ("nvmlDeviceGetFieldValues", "nvmlDeviceGetPowerUsage"):
        nvml.inject_error(function, pynvml.NVML_ERROR_UNKNOWN, times=30)
    _drive(monitor, clock, 1.0)
    assert monitor.readings()[0].power_w is None  # the gauge says it is missing rather than showing a stale value
    _drive(monitor, clock, 19.0)  # a 30 s window: the counter's 100 ms steps are < 0.5 % of it
    window = monitor.end("w")
    truth_j = nvml.gpus[0].true_energy_j() - truth0
    (reading,) = monitor.readings()
    assert not reading.failed and window.source is Source.MEASURED
    assert window.energy_j == pytest.approx(truth_j, rel=0.005)
    assert any("power reading missing" in note for note in monitor.notes)
    monitor.stop()
    devices.close()


def test_power_missing_on_a_gpu_without_counter_is_bridged_then_failed_with_its_energy_kept() -> None:
    clock = Clock()
    nvml = FakeNVML([FakeNVMLDevice("a40", time_fn=clock, energy_counter=False)], call_costs=False)
    devices, monitor = _monitor(nvml, clock)
    truth0 = nvml.gpus[0].true_energy_j()
    _drive(monitor, clock, 2.0)
    for function in ("nvmlDeviceGetFieldValues", "nvmlDeviceGetPowerUsage"):
        nvml.inject_error(function, pynvml.NVML_ERROR_UNKNOWN, times=3)  # 0.3 s without a reading: bridged
    _drive(monitor, clock, 2.0)
    (reading,) = monitor.readings()
    assert not reading.failed and reading.source is Source.INTEGRATED
    assert reading.energy_j == pytest.approx(nvml.gpus[0].true_energy_j() - truth0, rel=0.01)
    for function in ("nvmlDeviceGetFieldValues", "nvmlDeviceGetPowerUsage"):
        nvml.inject_error(function, pynvml.NVML_ERROR_UNKNOWN)  # for good
    kept_j = nvml.gpus[0].true_energy_j() - truth0
    _drive(monitor, clock, 3.0)
    (reading,) = monitor.readings()
    assert reading.failed and "no power reading" in (reading.error or "")
    assert reading.energy_j == pytest.approx(kept_j, rel=0.01)  # frozen at what was measured, not 0 J
    monitor.stop()
    devices.close()


def test_gpu_lost_between_anchors_keeps_the_integrated_tail_and_is_failed() -> None:
    clock = Clock()
    nvml = h100_node(2, time_fn=clock, call_costs=False)
    devices, monitor = _monitor(nvml, clock)
    truth0 = [g.true_energy_j() for g in nvml.gpus]
    monitor.begin("w")
    _drive(monitor, clock, 21.3)  # 0.3 s past gpu0's last counter read
    lost_truth_j = nvml.gpus[0].true_energy_j() - truth0[0]
    nvml.lose_gpu(0)
    _drive(monitor, clock, 3.0)
    window = monitor.end("w")
    lost, alive = monitor.readings()
    assert lost.failed and lost.source is Source.INTEGRATED and lost.power_w is None
    assert lost.energy_j == pytest.approx(lost_truth_j, rel=0.02)
    assert window.per_device_j["gpu0"] == pytest.approx(lost_truth_j, rel=0.02)  # not dropped to 0 J
    assert window.source is Source.INTEGRATED  # the window's total now holds an integrated part
    assert not alive.failed and alive.source is Source.MEASURED
    assert window.per_device_j["gpu1"] == pytest.approx(nvml.gpus[1].true_energy_j() - truth0[1], rel=0.005)
    monitor.stop()
    devices.close()
