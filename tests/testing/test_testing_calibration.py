"""The fakes behave like the measured H100: 100 ms refresh, measured call costs, measured power."""

from __future__ import annotations

import time

import pytest

from greentrain.device import discover
from greentrain.testing import FakeGPU
from greentrain.testing.costs import NVML_CALL_COST_S
from greentrain.testing.fake_nvml import h100_node
from greentrain.testing.load import H100, LoadWave, h100_wave

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self, t: float = 10.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_counter_and_power_change_only_at_the_100_ms_refresh() -> None:
    clock = Clock()
    gpu = FakeGPU("a40", time_fn=clock, draw=h100_wave(period_s=0.37))
    gpu.refresh_phase_s = 0.0
    clock.t = 10.001
    counter, power = gpu.total_energy_j(), gpu.power_w()
    for dt in (0.02, 0.05, 0.098):  # within the same refresh period: nothing moves
        clock.t = 10.001 + dt
        assert (gpu.total_energy_j(), gpu.power_w()) == (counter, power)
    clock.t = 10.1005  # just after the next refresh: the counter moved by exactly that period's energy
    assert gpu.total_energy_j() - counter == pytest.approx(gpu.power_w() * 0.1)
    # The truth is continuous: it moved between refreshes, the counter did not.
    truth = gpu.true_energy_j()
    clock.t = 10.15
    assert gpu.true_energy_j() > truth and gpu.total_energy_j() - counter == pytest.approx(gpu.power_w() * 0.1)


def test_load_wave_energy_is_the_exact_integral() -> None:
    wave = LoadWave(busy_w=548.0, idle_w=130.0, period_s=0.37, duty=0.6, phase_s=0.05)
    dt = 1e-4
    numeric = sum(wave.power_w(2.0 + (i + 0.5) * dt) for i in range(round(3.3 / dt))) * dt
    assert wave.energy_j(2.0, 5.3) == pytest.approx(numeric, rel=1e-3)
    with pytest.raises(ValueError, match="duty"):
        LoadWave(1.0, 0.0, period_s=0.1, duty=1.5)


def test_h100_node_draws_the_measured_power() -> None:
    clock = Clock()
    nvml = h100_node(2, time_fn=clock, call_costs=False)
    figures = H100()
    devices = discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False)
    assert [g.name for g in devices.gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    assert {g.architecture for g in devices.gpus} == {"hopper"}
    seen = set()
    for _ in range(200):
        clock.t += 0.0531
        seen.update(round(g.power_w()) for g in devices.gpus)
    assert min(seen) >= figures.after_load_w and max(seen) <= figures.train_bf16_w
    assert {round(figures.after_load_w), round(figures.train_bf16_w)} <= seen  # whole busy and idle periods
    devices.close()


def test_calls_spend_the_measured_cpu_time_unless_turned_off() -> None:
    nvml = h100_node(1, call_costs=True)
    devices = discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False)
    (gpu,) = devices.gpus
    reads = 5
    cpu0 = time.thread_time()
    for _ in range(reads):
        gpu.total_energy_j()
    spent_s = time.thread_time() - cpu0
    # Busy CPU time, like the driver: at least the measured 3.9 ms per read (a lower bound, not a timing).
    assert spent_s >= reads * NVML_CALL_COST_S["nvmlDeviceGetTotalEnergyConsumption"]
    devices.close()


def test_fake_gpu_spends_the_same_costs_when_asked() -> None:
    gpu = FakeGPU("a40", call_costs=True)
    cpu0 = time.thread_time()
    gpu.total_energy_j()
    gpu.power_w()
    spent_s = time.thread_time() - cpu0
    assert spent_s >= NVML_CALL_COST_S["nvmlDeviceGetTotalEnergyConsumption"] + NVML_CALL_COST_S[
        "nvmlDeviceGetFieldValues"]
