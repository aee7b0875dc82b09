"""Monitor: integration accuracy, attribution, windows, failures, lifecycle, event log."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from greentrain.errors import ConfigError, DeviceLostError
from greentrain.events import EventLog, read_events
from greentrain.monitor import Monitor
from greentrain.provenance import Source
from greentrain.testing import FakeCPUDomain, FakeGPU

pytestmark = pytest.mark.timeout(20)


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def drive(monitor: Monitor, clock: Clock, seconds: float, interval_s: float = 0.1) -> None:
    """Advance the injected clock in sampler-sized steps, sampling like the thread would."""
    for _ in range(round(seconds / interval_s)):
        clock.t += interval_s
        monitor.sample()


def test_integrated_energy_within_half_a_percent_of_ground_truth() -> None:
    clock = Clock()
    gpu = FakeGPU("a40", time_fn=clock, energy_counter=False, ripple=0.05)
    monitor = Monitor([gpu], time_fn=clock).start(background=False)
    start_truth_j = gpu.true_energy_j()
    monitor.begin("window")
    drive(monitor, clock, 2.0)
    window = monitor.end("window")
    truth_j = gpu.true_energy_j() - start_truth_j
    assert window.source is Source.INTEGRATED and window.duration_s == pytest.approx(2.0)
    assert window.energy_j == pytest.approx(truth_j, rel=0.005)
    # The power really varied: a constant-power assumption would be off by more than the tolerance.
    assert abs(gpu.base_power_w() * 2.0 - truth_j) / truth_j > 0.005


def test_counter_gpu_total_ends_on_a_counter_read_and_matches_the_truth() -> None:
    clock = Clock()
    gpu = FakeGPU("v100", time_fn=clock)
    monitor = Monitor([gpu], time_fn=clock).start(background=False)
    start_truth_j = gpu.true_energy_j()
    drive(monitor, clock, 1.0)
    gpu.set_power_limit_w(150)
    drive(monitor, clock, 29.0)  # the limit gauge refreshes once a second
    (reading,) = monitor.readings()
    assert reading.power_limit_w == 150 and reading.sm_clock_hz == gpu.sm_clock_mhz() * 1e6
    assert reading.model == "Tesla V100-PCIE-32GB" and reading.name == "gpu0" and reading.uuid == gpu.uuid
    monitor.stop()  # the job's end reads the counter
    (reading,) = monitor.readings()
    # The counter refreshes every 100 ms: exact to within one refresh of the truth (0.1 s of ~30 s).
    assert reading.source is Source.MEASURED
    assert reading.energy_j == pytest.approx(gpu.true_energy_j() - start_truth_j, rel=0.002)


def test_steps_sum_to_the_window_total_and_tile_time() -> None:
    clock = Clock()
    gpus = [FakeGPU("a40", time_fn=clock, energy_counter=False), FakeGPU("v100", index=1, time_fn=clock)]
    cpu = FakeCPUDomain("package-0", 70.0, time_fn=clock)
    monitor = Monitor(gpus, [cpu], time_fn=clock).start(background=False)
    monitor.begin("epoch")
    steps = []
    for k in range(12):
        clock.t += 0.037 * (1 + k % 3)  # steps shorter and longer than the sampling interval
        if k % 2:
            monitor.sample()
        if k < 11:
            steps.append(monitor.step_end())
    window = monitor.end("epoch")  # reads the counter
    steps.append(monitor.step_end())  # the last step ends at the window's end and takes up the counter's figure
    assert [s.step for s in steps] == list(range(1, 13))
    assert sum(s.energy_j for s in steps) == pytest.approx(window.energy_j, rel=1e-12)
    assert sum(s.duration_s for s in steps) == pytest.approx(window.duration_s)
    for key in ("gpu0", "gpu1", "package-0"):
        assert sum(s.per_device_j[key] for s in steps) == pytest.approx(window.per_device_j[key], rel=1e-12)
    assert all(s.energy_j > 0 for s in steps)
    assert window.source is Source.INTEGRATED  # weakest of measured + integrated
    # Steps shorter than two counter refreshes (0.2 s) are interpolated, longer ones keep the devices' label.
    assert [s.source for s in steps] == [
        Source.INTERPOLATED if s.duration_s < 0.2 else Source.INTEGRATED for s in steps
    ] and Source.INTERPOLATED in {s.source for s in steps}


def test_step_begin_excludes_the_gap_between_steps() -> None:
    clock = Clock()
    cpu = FakeCPUDomain("package-0", 100.0, time_fn=clock)
    monitor = Monitor(cpus=[cpu], time_fn=clock, fresh_step_reads=True).start(background=False)
    clock.t += 5.0  # idle before the step
    monitor.step_begin()
    clock.t += 0.25
    step = monitor.step_end()
    assert step.duration_s == pytest.approx(0.25) and step.energy_j == pytest.approx(25.0)
    assert step.per_device_j == {"package-0": pytest.approx(25.0)} and step.power_w == pytest.approx(100.0)


def test_between_samples_steps_extend_the_last_sample_without_device_calls() -> None:
    clock = Clock()
    gpu = FakeGPU("a40", time_fn=clock, ripple=0.0)
    monitor = Monitor([gpu], time_fn=clock).start(background=False)
    drive(monitor, clock, 0.3)
    gpu.fail(DeviceLostError("must not be called"))  # any device call from step_* would now fail it
    monitor.step_begin()
    clock.t += 0.04
    step = monitor.step_end()
    assert step.energy_j == pytest.approx(gpu.base_power_w() * 0.04)
    assert not monitor.readings()[0].failed


def test_windows_nest_by_name_and_misuse_is_named() -> None:
    clock = Clock()
    monitor = Monitor(cpus=[FakeCPUDomain(power_w=10.0, time_fn=clock)], time_fn=clock).start(background=False)
    monitor.begin("outer")
    clock.t += 1
    monitor.begin("inner")
    clock.t += 2
    inner = monitor.end("inner")
    clock.t += 1
    outer = monitor.end("outer")
    assert (inner.energy_j, outer.energy_j) == (pytest.approx(20.0), pytest.approx(40.0))
    monitor.begin("a")
    with pytest.raises(ConfigError, match="'a' is already open"):
        monitor.begin("a")
    with pytest.raises(ConfigError, match="'b' was never begun.*'a'"):
        monitor.end("b")


def test_lost_gpu_is_marked_failed_reported_once_and_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    lost, healthy = FakeGPU("a40", time_fn=clock), FakeGPU("a40", index=1, time_fn=clock)
    monitor = Monitor([lost, healthy], time_fn=clock).start(background=False)
    drive(monitor, clock, 0.5)
    frozen_j = monitor.readings()[0].energy_j
    lost.fail(DeviceLostError("GPU 0: the GPU stopped answering"))
    with caplog.at_level(logging.WARNING, logger="greentrain.monitor"):
        drive(monitor, clock, 0.5)
        step = monitor.step_end()  # training is not interrupted
    first, second = monitor.readings()
    assert first.failed and "stopped answering" in (first.error or "") and first.power_w is None
    assert first.energy_j == pytest.approx(frozen_j)  # energy measured before the loss is kept
    assert not second.failed and second.energy_j == pytest.approx(healthy.true_energy_j(), rel=0.01)  # both from t0
    assert second.energy_j > 1.9 * first.energy_j
    assert step.per_device_j["gpu1"] > 0
    assert sum("gpu0 failed" in r.getMessage() for r in caplog.records) == 1
    assert any("gpu0 failed" in n for n in monitor.notes)


def test_zero_devices_is_all_zero_and_says_so() -> None:
    with Monitor() as monitor:
        assert monitor.readings() == [] and monitor.total_energy_j() == 0.0 and monitor.power_w() == 0.0
        step = monitor.step_end()
        assert step.energy_j == 0.0 and step.per_device_j == {}
        assert monitor.notes == ["no devices to measure: every energy figure is 0 J"]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "fast", None])
def test_bad_interval_is_rejected(bad: object) -> None:
    with pytest.raises(ConfigError, match="interval_s"):
        Monitor(interval_s=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -5, float("nan"), "slow"])
def test_bad_anchor_interval_is_rejected(bad: object) -> None:
    with pytest.raises(ConfigError, match="anchor_interval_s"):
        Monitor(anchor_interval_s=bad)  # type: ignore[arg-type]


def test_duplicate_devices_are_rejected() -> None:
    with pytest.raises(ConfigError, match="gpu0 given more than once"):
        Monitor([FakeGPU(), FakeGPU()])


def test_figures_before_start_are_refused() -> None:
    with pytest.raises(ConfigError, match="not started"):
        Monitor().step_end()


def _wait_for(predicate, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_background_thread_samples_and_stops_cleanly(tmp_path: Path) -> None:
    gpu = FakeGPU("a40", energy_counter=False)
    log_path = tmp_path / "run.jsonl"
    with EventLog(log_path) as log:
        before = set(threading.enumerate())
        monitor = Monitor([gpu], [FakeCPUDomain()], interval_s=0.01, event_log=log).start()
        # Other tests' session-scoped fixtures may run monitors too: look only at the thread this one started.
        (sampler,) = [t for t in threading.enumerate() if t not in before and t.name == "greentrain-monitor"]
        _wait_for(lambda: monitor.readings()[0].energy_j > 0)
        monitor.stop()
        monitor.stop()  # idempotent
    assert not sampler.is_alive()
    frozen = monitor.total_energy_j()
    assert frozen == monitor.total_energy_j()  # frozen after stop
    events = [e for e in read_events(log_path) if e["event"] == "sample"]
    assert {e["device"] for e in events} == {"gpu0", "package-0"}
    assert {e["source"] for e in events} == {"integrated", "measured"}
    assert all(e["energy_j"] >= 0 and e["kind"] in ("gpu", "cpu") for e in events)


def test_failure_is_logged_as_a_sample_event(tmp_path: Path) -> None:
    clock = Clock()
    gpu = FakeGPU("a40", time_fn=clock)
    log_path = tmp_path / "run.jsonl"
    with EventLog(log_path) as log:
        monitor = Monitor([gpu], time_fn=clock, event_log=log).start(background=False)
        gpu.fail(DeviceLostError("GPU 0 lost"))
        drive(monitor, clock, 0.3)
    failed = [e for e in read_events(log_path) if e.get("failed")]
    assert len(failed) == 1 and failed[0]["device"] == "gpu0" and failed[0]["error"] == "GPU 0 lost"


def test_event_interval_thins_the_log(tmp_path: Path) -> None:
    clock = Clock()
    log_path = tmp_path / "run.jsonl"
    with EventLog(log_path) as log:
        monitor = Monitor(cpus=[FakeCPUDomain(time_fn=clock)], time_fn=clock, event_log=log, event_interval_s=1.0)
        monitor.start(background=False)
        drive(monitor, clock, 3.0)
    assert len(read_events(log_path)) == 3


class HangingGPU(FakeGPU):
    """A GPU whose power read blocks until released, like a driver call that never returns."""

    def __init__(self) -> None:
        super().__init__("a40", energy_counter=False)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.armed = False

    def power_w(self) -> float:
        if self.armed:
            self.entered.set()
            self.release.wait(30)
        return super().power_w()


def test_stop_does_not_hang_on_a_hung_device(caplog: pytest.LogCaptureFixture) -> None:
    gpu = HangingGPU()
    monitor = Monitor([gpu], interval_s=0.001).start()
    monitor.stop_timeout_s = 0.05  # the read will not return; do not wait the default 5 s
    gpu.armed = True
    assert gpu.entered.wait(10)
    with caplog.at_level(logging.WARNING, logger="greentrain.monitor"):
        monitor.stop()
    assert "a device read hangs" in caplog.text
    assert monitor.total_energy_j() >= 0.0  # figures are frozen and readable
    gpu.release.set()


@pytest.mark.parametrize("fresh", [False, True], ids=["between samples", "fresh counter reads"])
def test_steps_shorter_than_two_counter_refreshes_are_interpolated(fresh: bool) -> None:
    clock = Clock()
    gpu = FakeGPU("v100", time_fn=clock)
    monitor = Monitor([gpu], time_fn=clock, fresh_step_reads=fresh).start(background=False)
    labels = {}
    for duration_s in (0.05, 0.15, 0.199, 0.2, 0.25, 1.0):
        monitor.step_begin()
        drive(monitor, clock, duration_s, interval_s=duration_s / 2)
        step = monitor.step_end()
        labels[duration_s] = step.source
        assert step.energy_j > 0  # a share is still given, only labelled for what it is
    assert labels == {0.05: Source.INTERPOLATED, 0.15: Source.INTERPOLATED, 0.199: Source.INTERPOLATED,
                      0.2: Source.MEASURED, 0.25: Source.MEASURED, 1.0: Source.MEASURED}  # fmt: skip
    assert monitor.source() is Source.MEASURED  # the job's total stays measured
