"""The monitor over real NVMLGPU code paths (pynvml double): a GPU lost mid-run."""

from __future__ import annotations

import pytest

from greentrain.device import discover
from greentrain.monitor import Monitor
from greentrain.provenance import Source
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

pytestmark = pytest.mark.timeout(20)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_gpu_lost_mid_run_is_marked_failed_and_the_rest_is_measured() -> None:
    clock = Clock()
    nvml = FakeNVML([
        FakeNVMLDevice("a40", time_fn=clock),
        FakeNVMLDevice("v100", time_fn=clock, energy_counter=False),
    ])  # fmt: skip
    devices = discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False)
    monitor = Monitor.from_devices(devices, time_fn=clock).start(background=False)
    for _ in range(5):
        clock.t += 0.1
        monitor.sample()
    truth_at_loss_j = nvml.gpus[0].true_energy_j()
    nvml.lose_gpu(0)
    for _ in range(5):
        clock.t += 0.1
        monitor.sample()
        monitor.step_end()
    lost, integrated = monitor.readings()
    # Lost between two counter reads: the energy since the last one came from power samples, and is kept.
    assert lost.failed and "GPU is lost" in (lost.error or "") and lost.source is Source.INTEGRATED
    assert lost.energy_j == pytest.approx(truth_at_loss_j, rel=0.05)
    assert not integrated.failed and integrated.source is Source.INTEGRATED
    truth_j = nvml.gpus[1].true_energy_j()
    assert integrated.energy_j == pytest.approx(truth_j, rel=0.01)
    monitor.stop()
    devices.close()
