"""The monitor on the H100-calibrated pynvml double: counter anchors, power shaping, window accuracy."""

from __future__ import annotations

import pytest

from greentrain.device import discover
from greentrain.monitor import Monitor
from greentrain.provenance import Source
from greentrain.testing.fake_nvml import h100_node

pytestmark = pytest.mark.timeout(60)

COUNTER = "nvmlDeviceGetTotalEnergyConsumption"


class Clock:
    def __init__(self, t: float = 500.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _node(count: int, clock: Clock):  # type: ignore[no-untyped-def]
    # Costs off: this test is about figures, the benchmark measures the costs.
    nvml = h100_node(count, time_fn=clock, call_costs=False)
    return nvml, discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False)


def _run(monitor: Monitor, clock: Clock, seconds: float, interval_s: float = 0.1) -> None:
    for k in range(round(seconds / interval_s)):
        clock.t += interval_s * (1.0 + 0.03 * ((k % 7) - 3) / 3)  # a sampler's jitter: passes drift off the refresh
        monitor.sample()


def test_windows_on_load_waves_are_within_half_a_percent_of_the_true_energy() -> None:
    clock = Clock()
    nvml, devices = _node(4, clock)
    monitor = Monitor.from_devices(devices, time_fn=clock).start(background=False)
    errors = []
    for _ in range(3):  # back-to-back windows of ~30 s; the waves' 0.37 s period does not line up with 100 ms
        truth_start = [g.true_energy_j() for g in nvml.gpus]
        monitor.begin("window")
        _run(monitor, clock, 30.0)
        window = monitor.end("window")
        truth = [g.true_energy_j() - s for g, s in zip(nvml.gpus, truth_start, strict=True)]
        assert window.source is Source.MEASURED
        for i, truth_j in enumerate(truth):
            errors.append(window.per_device_j[f"gpu{i}"] / truth_j - 1)
        assert window.energy_j == pytest.approx(sum(truth), rel=0.005)
    assert max(abs(e) for e in errors) < 0.005, errors
    # The load really varies: a constant draw at the busy power would be far off.
    assert abs(nvml.gpus[0].draw.busy_w * 30.0 / truth[0] - 1) > 0.2  # type: ignore[union-attr]
    monitor.stop()
    devices.close()


def test_the_counter_is_read_at_the_slow_cadence_and_at_boundaries_only() -> None:
    clock = Clock()
    nvml, devices = _node(8, clock)
    monitor = Monitor.from_devices(devices, time_fn=clock, anchor_interval_s=5.0).start(background=False)
    before = len([c for c in nvml.calls if c[0] == COUNTER])
    per_pass = []
    for _ in range(200):  # 20 s of passes over 8 GPUs
        n0 = len(nvml.calls)
        _run(monitor, clock, 0.1)
        per_pass.append(sum(1 for c in nvml.calls[n0:] if c[0] == COUNTER))
    counter_reads = len([c for c in nvml.calls if c[0] == COUNTER]) - before
    assert max(per_pass) == 1  # staggered: one GPU's 3.9 ms read per pass at most, never all eight at once
    power_reads = len([c for c in nvml.calls if c[0] == "nvmlDeviceGetFieldValues"])
    assert 8 * 3 <= counter_reads <= 8 * 4  # every 5 s per GPU, staggered: never all in one pass
    assert power_reads >= 8 * 200
    monitor.begin("w")  # a window boundary reads every counter
    assert len([c for c in nvml.calls if c[0] == COUNTER]) - before == counter_reads + 8
    monitor.stop()
    devices.close()


def test_steps_between_anchors_are_shaped_by_power_and_add_up_to_the_counter() -> None:
    clock = Clock()
    nvml, devices = _node(1, clock)
    monitor = Monitor.from_devices(devices, time_fn=clock).start(background=False)
    truth0 = nvml.gpus[0].true_energy_j()
    monitor.begin("job")
    steps = []
    for _ in range(120):  # 0.5 s steps, five passes each: measured steps
        _run(monitor, clock, 0.5)
        steps.append(monitor.step_end())
    job = monitor.end("job")
    steps.append(monitor.step_end())  # ends at the window's counter read: takes up what the estimates missed
    truth_j = nvml.gpus[0].true_energy_j() - truth0
    assert job.energy_j == pytest.approx(truth_j, rel=0.005)  # the window is the counter's
    # Steps never go negative, so their sum may run ahead of the counter: by one counter read's error at most
    # (a fraction of a second at busy power), never cumulative.
    assert sum(s.energy_j for s in steps) == pytest.approx(truth_j, rel=0.005)
    assert 0 <= sum(s.energy_j for s in steps) - job.energy_j <= 0.2 * nvml.gpus[0].draw.busy_w  # type: ignore
    assert {s.source for s in steps[:-1]} == {Source.MEASURED}
    # Each step's energy follows the load: busy and resting steps differ, none is an even share.
    assert max(s.energy_j for s in steps[:-1]) > 1.1 * min(s.energy_j for s in steps[:-1])
    monitor.stop()
    devices.close()
