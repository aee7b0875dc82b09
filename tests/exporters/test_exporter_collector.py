"""GreentrainCollector in a fresh registry: values, failures, cache-only signal reads, no secrets."""

from __future__ import annotations

from collections.abc import Callable

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from gt_promstack import TraceSignals
from prometheus_client import CollectorRegistry, generate_latest

from greentrain.clock import FrozenClock
from greentrain.errors import DeviceLostError, SignalError
from greentrain.exporters import GreentrainCollector
from greentrain.jobstats import JobState, JobStats
from greentrain.monitor import Monitor
from greentrain.signals.base import IntensityPoint, Kind, ProviderStatus
from greentrain.testing import FakeCPUDomain, FakeGPU

pytestmark = pytest.mark.timeout(30)

T0 = datetime(2022, 3, 1, 8, 10, tzinfo=UTC)


def _registry(**kwargs: object) -> tuple[CollectorRegistry, GreentrainCollector]:
    registry = CollectorRegistry()
    collector = GreentrainCollector(job="j", **kwargs)  # type: ignore[arg-type]
    registry.register(collector)
    return registry, collector


def test_device_values_come_from_the_gpu_and_cpu_readings() -> None:
    now = [100.0]
    gpu = FakeGPU("v100", index=3, uuid="GPU-abc", time_fn=lambda: now[0], ripple=0.0)
    cpu = FakeCPUDomain("package-1", 40.0, time_fn=lambda: now[0])
    monitor = Monitor([gpu], [cpu], time_fn=lambda: now[0]).start(background=False)
    registry, _ = _registry(monitor=monitor)
    now[0] += 10.0
    monitor.sample()
    labels = {"gpu": "3", "UUID": "GPU-abc"}
    assert registry.get_sample_value("greentrain_gpu_power_watts", labels) == pytest.approx(gpu.base_power_w())
    assert registry.get_sample_value("greentrain_gpu_energy_joules_total", {**labels, "source": "measured"}) == \
        pytest.approx(10.0 * gpu.base_power_w())
    assert registry.get_sample_value("greentrain_gpu_power_limit_watts", labels) == 250.0
    assert registry.get_sample_value("greentrain_gpu_sm_clock_hertz", labels) == 1380e6
    assert registry.get_sample_value("greentrain_cpu_energy_joules_total",
                                     {"package": "package-1", "source": "measured"}) == pytest.approx(400.0)


def test_a_lost_gpu_reports_not_ok_and_keeps_the_others() -> None:
    good, lost = FakeGPU("a40", index=0), FakeGPU("a40", index=1)
    lost.fail(DeviceLostError("GPU 1 lost"))
    registry, _ = _registry(monitor=Monitor([good, lost]).start(background=False))
    assert registry.get_sample_value("greentrain_gpu_reading_ok", {"gpu": "1", "UUID": lost.uuid}) == 0
    assert registry.get_sample_value("greentrain_gpu_reading_ok", {"gpu": "0", "UUID": good.uuid}) == 1
    assert registry.get_sample_value("greentrain_gpu_power_watts", {"gpu": "1", "UUID": lost.uuid}) is None


class _BrokenMonitor:
    def readings(self) -> list[object]:
        raise RuntimeError("sampler thread died")


def test_a_broken_monitor_drops_only_device_series() -> None:
    stats = JobStats(job="j")
    stats.add(steps=7)
    registry, _ = _registry(monitor=_BrokenMonitor(), job_stats=stats)
    assert registry.get_sample_value("greentrain_training_steps_total", {"job": "j"}) == 7
    assert b"greentrain_gpu_power_watts" not in generate_latest(registry)


def test_job_series_follow_jobstats() -> None:
    stats = JobStats(job="ignored-here", state=JobState.PAUSED, precision="fp16", power_limit_w=180.0,
                     deadline=T0, projected_finish=T0)
    stats.add(steps=5, tokens=640, energy_j=900.0, emissions_g=1.5, emissions_avoided_g=0.5)
    stats.count_action("pause", 2)
    registry, _ = _registry(job_stats=stats)
    get = registry.get_sample_value
    assert get("greentrain_job_state", {"job": "j", "state": "paused"}) == 1
    assert get("greentrain_job_state", {"job": "j", "state": "running"}) == 0
    assert get("greentrain_policy_actions_total", {"job": "j", "action": "pause"}) == 2
    assert get("greentrain_emissions_avoided_grams_total", {"job": "j"}) == 0.5
    assert get("greentrain_job_emissions_avoided_grams", {"job": "j"}) == 0.5  # the name, same net figure
    assert get("greentrain_job_precision_info", {"job": "j", "precision": "fp16"}) == 1
    assert get("greentrain_job_deadline_timestamp_seconds", {"job": "j"}) == T0.timestamp()
    assert get("greentrain_job_power_limit_watts", {"job": "j"}) == 180.0
    assert get("greentrain_job_finished_timestamp_seconds", {"job": "j"}) is None
    assert get("greentrain_job_replicas", {"job": "j", "kind": "planned"}) is None  # a fixed-size job
    stats.update(replicas_planned=0, replicas_actual=4)
    registry, _ = _registry(job_stats=stats)
    assert registry.get_sample_value("greentrain_job_replicas", {"job": "j", "kind": "planned"}) == 0
    assert registry.get_sample_value("greentrain_job_replicas", {"job": "j", "kind": "actual"}) == 4


def test_net_avoided_gauge_goes_negative_when_waiting_cost_more() -> None:
    stats = JobStats(job="ignored-here", state=JobState.RUNNING)
    stats.add(steps=1, energy_j=100.0, emissions_g=1.0, emissions_avoided_g=0.5)
    stats.add(energy_j=40.0, emissions_g=0.8, emissions_avoided_g=-0.8)  # a pause whose idle draw cost 0.8 g
    registry, _ = _registry(job_stats=stats)
    assert registry.get_sample_value("greentrain_job_emissions_avoided_grams", {"job": "j"}) == pytest.approx(-0.3)
    assert registry.get_sample_value("greentrain_emissions_avoided_grams_total", {"job": "j"}) == pytest.approx(-0.3)


def test_trace_signal_and_forecast_for_the_current_hour(carbon_trace: Callable[[str], Path]) -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(carbon_trace("DE-LU_2022_hourly.csv"), clock)
    registry, _ = _registry(signals=signals, clock=clock)
    point = signals.peek()
    assert point.start == datetime(2022, 3, 1, 8, tzinfo=UTC)
    get = registry.get_sample_value
    assert get("greentrain_grid_carbon_intensity_grams_per_kwh",
               {"zone": "DE", "provider": "csv", "kind": "actual"}) == point.intensity_g_per_kwh
    assert get("greentrain_grid_carbon_intensity_grams_per_kwh",
               {"zone": "DE", "provider": "csv", "kind": "forecast"}) == pytest.approx(point.intensity_g_per_kwh * 1.1)
    assert get("greentrain_carbon_signal_stale", {"provider": "csv"}) == 0
    assert signals.network_calls == 0


class _SlowChain:
    """A chain without peek(): latest() blocks like a hung API, then fails."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def latest(self) -> IntensityPoint:
        self.calls += 1
        self.release.wait(10)
        if self.calls == 1:
            return IntensityPoint(start=T0, end=T0, intensity_g_per_kwh=321.0, kind=Kind.STATIC,
                                  provider="static", zone="FR")
        raise SignalError("down")

    def forecast(self, horizon_h: float) -> list[IntensityPoint]:
        return []

    def status(self) -> ProviderStatus:
        return ProviderStatus(provider="static", zone="FR", age_s=5.0, stale=False)


def test_a_hung_provider_never_blocks_the_scrape() -> None:
    chain = _SlowChain()
    registry, collector = _registry(signals=chain, signal_refresh_s=0.05)
    started = time.monotonic()
    first = generate_latest(registry)
    assert time.monotonic() - started < 1.0  # the hung latest() runs on the refresher thread
    assert b"grid_carbon_intensity" not in first
    chain.release.set()
    value = None
    for _ in range(100):
        value = registry.get_sample_value("greentrain_grid_carbon_intensity_grams_per_kwh",
                                          {"zone": "FR", "provider": "static", "kind": "static"})
        if value is not None:
            break
        time.sleep(0.02)
    assert value == 321.0
    time.sleep(0.2)  # later refreshes fail: the last good value stays, its age keeps growing
    age = registry.get_sample_value("greentrain_carbon_signal_age_seconds", {"provider": "static"})
    assert age is not None and age >= 5.0
    collector.close()


def test_no_secret_reaches_labels_or_values(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "em-key-9f8e7d6c5b4a"
    monkeypatch.setenv("ELECTRICITYMAPS_API_KEY", secret)

    class Chain:
        def peek(self) -> IntensityPoint:
            return IntensityPoint(start=T0, end=T0, intensity_g_per_kwh=100.0, kind=Kind.ACTUAL,
                                  provider="electricitymaps", zone="GB")

        def status(self) -> ProviderStatus:
            return ProviderStatus(provider="electricitymaps", zone="GB", age_s=1.0, stale=True,
                                  last_error=f"401 for auth-token {secret}")

    registry, _ = _registry(signals=Chain(), job_stats=JobStats(job="j"))
    text = generate_latest(registry).decode()
    assert "electricitymaps" in text and secret not in text and "401" not in text
