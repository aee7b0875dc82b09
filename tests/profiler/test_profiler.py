"""The profiler finds the measured optimum on the fake device, caches it, and degrades when refused."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from greentrain.actuators import ActuatorSet
from greentrain.testing import FileBackedGPU
from greentrain.device.profiles import BUILTIN_GPUS, load_gpu_profile
from greentrain.profiler import (
    LocalCollective,
    OperatingPointProfiler,
    ProfileCache,
    ProfilerConfig,
    energy_optimal,
    power_limit_grid,
    workload_fingerprint,
)
from greentrain.testing import FakeGPU

pytestmark = pytest.mark.timeout(60)
BASE_STEP_S = 2.0  # a step at full power takes 2 s of fake time


class FakeTime:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _run(profiler: OperatingPointProfiler, gpu, clock: FakeTime, max_steps: int = 500) -> int:
    steps = 0
    while not profiler.done and steps < max_steps:
        profiler.before_step()
        clock.t += gpu.step_time_s(BASE_STEP_S)  # the step runs at the speed the GPU's setting allows
        profiler.after_step()
        steps += 1
    assert profiler.done
    return steps


CASES = [(g, w) for g in BUILTIN_GPUS for w in load_gpu_profile(g).workloads()]


@pytest.mark.parametrize(("gpu_model", "workload"), CASES)
def test_finds_known_optimum(tmp_path: Path, gpu_model: str, workload: str) -> None:
    clock = FakeTime()
    gpu = FakeGPU(gpu_model, workload, time_fn=clock)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        profiler = OperatingPointProfiler([gpu], acts, time_fn=clock, collective=LocalCollective())
        steps = _run(profiler, gpu, clock)
        points = profiler.result()
    grid = power_limit_grid(gpu, 25.0)
    assert steps == len(grid) * 4 and [p.power_limit_w for p in points] == grid
    # the truth: energy per epoch of the measured CSV (interpolated by the fake between measured limits)
    truth = {w: gpu.measured_at(w)[0] * gpu.measured_at(w)[1] for w in grid}
    best_true = min(truth, key=truth.get)
    best = energy_optimal(points)
    # equal, or a near-tie (the fake's power ripple moves a window's energy by a few tenths of a percent)
    assert truth[best.power_limit_w] <= truth[best_true] * 1.005, (best.power_limit_w, best_true)
    measured = {p.power_limit_w: p for p in gpu.points}
    if best_true in measured:
        assert min(measured.values(), key=lambda m: m.energy_per_epoch_j).energy_per_epoch_j == pytest.approx(
            truth[best_true]
        )
    fastest = min(measured[w].time_per_epoch_s for w in grid if w in measured)
    for p in points:
        if p.power_limit_w in measured:
            m = measured[p.power_limit_w]
            assert p.relative_speed == pytest.approx(fastest / m.time_per_epoch_s, rel=1e-6)
            assert p.power_w == pytest.approx(m.average_power_w, rel=0.02)
    assert gpu.power_limit_w() == grid[0]  # back at the top after profiling
    assert gpu.set_calls[0] == ("set_power_limit_w", grid[0]) or gpu.set_calls[0][1] == grid[1]


def test_exact_optimum_on_a_workload_with_a_clear_winner(tmp_path: Path) -> None:
    clock = FakeTime()
    gpu = FakeGPU("a40", "imagenet/resnet50", time_fn=clock, ripple=0.0)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        profiler = OperatingPointProfiler([gpu], acts, time_fn=clock, collective=LocalCollective())
        _run(profiler, gpu, clock)
    expected = min(gpu.points, key=lambda p: p.energy_per_epoch_j).power_limit_w
    assert energy_optimal(profiler.result()).power_limit_w == expected == 200.0


def test_cache_skips_reprofiling_and_survives_corruption(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = ProfileCache(tmp_path / "cache")
    fp = workload_fingerprint(extra="resnet50/bs256")

    def profile() -> tuple[OperatingPointProfiler, FakeGPU, int]:
        clock = FakeTime()
        gpu = FakeGPU("a40", "imagenet/resnet50", time_fn=clock)
        with ActuatorSet([gpu], state_dir=tmp_path / "state", install_hooks=False) as acts:
            prof = OperatingPointProfiler([gpu], acts, time_fn=clock, fingerprint=fp, cache=cache,
                                          collective=LocalCollective())
            steps = _run(prof, gpu, clock)
        return prof, gpu, steps

    first, _, steps = profile()
    assert steps == 36 and not first.from_cache
    second, gpu, steps = profile()
    assert second.from_cache and steps == 1 and gpu.set_calls == []
    assert second.result() == first.result()
    files = list((tmp_path / "cache").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["key"]["fingerprint"] == fp
    files[0].write_text("{broken")
    with caplog.at_level(logging.WARNING):
        third, _, steps = profile()
    assert not third.from_cache and steps == 36 and "unreadable" in caplog.text
    # a different workload fingerprint is a different profile
    assert cache.load(ProfileCache.key("NVIDIA A40", "other", "power_limit", power_limit_grid(gpu, 25.0))) is None


def test_refused_power_limit_aborts_profiling_and_job_goes_on(tmp_path: Path) -> None:
    clock = FakeTime()
    gpu = FakeGPU("a40", "imagenet/resnet50", time_fn=clock, privileged=False)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        profiler = OperatingPointProfiler([gpu], acts, time_fn=clock, collective=LocalCollective())
        steps = _run(profiler, gpu, clock)
        # the top limit is already in force; the first change (to 275 W) is refused
        assert steps == 4 and profiler.result() == () and "275 W could not be set" in profiler.aborted_reason
        assert acts.refused_total["power_limit"] >= 1


def test_sm_clock_sweep_on_file_backed_gpu(tmp_path: Path) -> None:
    clock = FakeTime()
    gpu = FileBackedGPU(tmp_path / "gpu.json", "a40", time_fn=clock)
    config = ProfilerConfig(knob="sm_clocks", sm_clock_step_mhz=300, min_sm_clock_mhz=600, measure_steps=2)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        profiler = OperatingPointProfiler([gpu], acts, config=config, time_fn=clock, collective=LocalCollective())
        _run(profiler, gpu, clock)
        points = profiler.result()
    caps = [p.sm_clocks_mhz[1] for p in points]
    assert caps == sorted(caps, reverse=True) and caps[0] == 1740 and caps[-1] >= 600
    speeds = [p.relative_speed for p in points]
    assert speeds[0] == pytest.approx(1.0) and all(a > b for a, b in zip(speeds, speeds[1:]))
    assert all(a.power_w > b.power_w for a, b in zip(points, points[1:]))
    assert gpu.is_default()


def test_bad_config_and_missing_counter() -> None:
    from greentrain.errors import ConfigError

    with pytest.raises(ConfigError, match="knob"):
        ProfilerConfig(knob="fans")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="measure_steps"):
        ProfilerConfig(measure_steps=0)
    gpu = FakeGPU("a40", energy_counter=False)
    with pytest.raises(ConfigError, match="no energy counter; pass energy_fn"):
        OperatingPointProfiler([gpu], None, collective=LocalCollective())


def test_refused_clock_lock_aborts_clock_sweep(tmp_path: Path) -> None:
    clock = FakeTime()
    gpu = FileBackedGPU(tmp_path / "gpu.json", "a40", time_fn=clock, privileged=False)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        profiler = OperatingPointProfiler([gpu], acts, config=ProfilerConfig(knob="sm_clocks"), time_fn=clock,
                                          collective=LocalCollective())
        steps = _run(profiler, gpu, clock)
        assert steps == 1 and profiler.result() == () and "could not be locked" in profiler.aborted_reason
