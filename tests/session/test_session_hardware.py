"""Session wires power limits and precision through the engine: profiled, decided, journaled, restored."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from gt_engine_doubles import TraceSignals, hourly
from gt_session_loop import PauseAtSteps

from greentrain.clock import FrozenClock
from greentrain.device import DeviceSet
from greentrain.device.profiles import load_gpu_profile
from greentrain.errors import ConfigError
from greentrain.events import read_events
from greentrain.profiler import power_limit_grid
from greentrain.session import Session
from greentrain.testing import FakeGPU, FileBackedGPU

pytestmark = pytest.mark.timeout(30)

T0 = datetime(2024, 3, 1, tzinfo=UTC)
BASE_STEP_S = 2.0  # a step at full power takes 2 s of job time
STEPS = 45


def known_optimum_w(gpu_model: str, workload: str) -> float:
    """The measured energy-optimal limit of the shipped Zeus profile (least energy per epoch)."""
    by_limit: dict[float, list[float]] = {}
    for p in load_gpu_profile(gpu_model).points(workload):
        by_limit.setdefault(p.power_limit_w, []).append(p.energy_per_epoch_j)
    return min(by_limit, key=lambda w: sum(by_limit[w]) / len(by_limit[w]))


def fake_gpu(clock: FrozenClock, **kwargs) -> FakeGPU:
    return FakeGPU("a40", "imagenet/resnet50", time_fn=lambda: clock.now().timestamp(), ripple=0.0, **kwargs)


def session_for(tmp_path: Path, clock: FrozenClock, gpu: FakeGPU, policy="energy-optimal", **kwargs) -> Session:
    tmp_path.mkdir(parents=True, exist_ok=True)
    kwargs.setdefault("profile_cache_dir", tmp_path / "cache")
    return Session(policy, steps_total=STEPS, clock=clock, devices=DeviceSet([gpu], [], []), relaunch="none",
                   pause_mode="suspend", progress=False, jsonl=tmp_path / "run.jsonl",
                   state_dir=tmp_path / "state", **kwargs)


def run_steps(session: Session, clock: FrozenClock, gpu: FakeGPU, limits: list[float]) -> None:
    for _ in range(session.start_step, STEPS):
        clock.advance(gpu.step_time_s(BASE_STEP_S))  # the step runs at the speed the GPU's limit allows
        session.step(tokens=1)
        limits.append(gpu.power_limit_w())


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENTRAIN_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.setenv("GREENTRAIN_STATE_DIR", str(tmp_path / "default-state"))


def test_energy_optimal_limit_is_profiled_applied_logged_and_restored(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    gpu = fake_gpu(clock)
    default_w = gpu.power_limit_constraints().default_w
    optimum_w = known_optimum_w("a40", "imagenet/resnet50")
    sweep_steps = len(power_limit_grid(gpu, 25.0)) * 4  # 1 settle + 3 measured steps per limit
    limits: list[float] = []
    with session_for(tmp_path, clock, gpu) as session:
        run_steps(session, clock, gpu, limits)
        assert session.engine.operating_points, "the profile reached the engine"
        assert session.engine.progress.steps_done == STEPS  # profiling steps are training steps
    assert optimum_w != default_w
    assert set(limits[:sweep_steps - 1]) == set(power_limit_grid(gpu, 25.0))  # the sweep ran on the real knob
    assert limits[sweep_steps:] == [optimum_w] * (STEPS - sweep_steps)  # decided at the next boundary, kept
    assert gpu.power_limit_w() == default_w  # restored when the with block closed
    events = read_events(tmp_path / "run.jsonl")
    profile = [e for e in events if e["event"] == "operating_points"]
    assert len(profile) == 1 and profile[0]["source"] == "measured"
    actions = [e for e in events if e["event"] == "action" and e.get("power_limit_w") == optimum_w]
    assert actions and "power_limit" in actions[0]["applied"] and "energy-optimal" in actions[0]["reason"]


def test_carbon_aware_plans_with_the_measured_points(tmp_path: Path) -> None:
    """With a carbon signal the DP planner, not a shortcut, picks the point: flat grid -> least energy."""
    clock = FrozenClock(T0)
    gpu = fake_gpu(clock)
    signals = TraceSignals(hourly(T0, [200.0] * 100), clock)
    limits: list[float] = []
    with session_for(tmp_path, clock, gpu, policy="carbon-aware", provider=signals, deadline="+48",
                     decide_interval_s=1) as session:
        run_steps(session, clock, gpu, limits)
        reason = session.engine.decision.reason
    assert limits[-1] == known_optimum_w("a40", "imagenet/resnet50")
    assert reason.startswith("carbon-aware: run this interval") and "W limit" in reason
    assert gpu.power_limit_w() == gpu.power_limit_constraints().default_w


def test_cached_profile_skips_the_sweep(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    gpu = fake_gpu(clock)
    optimum_w = known_optimum_w("a40", "imagenet/resnet50")
    with session_for(tmp_path, clock, gpu) as session:
        run_steps(session, clock, gpu, [])
    limits: list[float] = []
    with session_for(tmp_path / "second", clock, gpu, profile_cache_dir=tmp_path / "cache") as session:
        assert session.engine.operating_points, "cached points are known before the first step"
        run_steps(session, clock, gpu, limits)
    assert limits == [optimum_w] * STEPS
    assert gpu.power_limit_w() == gpu.power_limit_constraints().default_w


def test_unprivileged_gpu_trains_timing_only_with_one_note(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    gpu = fake_gpu(clock, privileged=False)
    default_w = gpu.power_limit_w()
    limits: list[float] = []
    with session_for(tmp_path, clock, gpu) as session:
        run_steps(session, clock, gpu, limits)
        notes = [n for n in session.engine.notes if n.startswith("power control off")]
    assert session.finished and limits == [default_w] * STEPS and gpu.set_calls == []
    assert len(notes) == 1 and "timing-only" in notes[0]
    assert session.engine.operating_points == ()


def test_gpu_lost_mid_sweep_does_not_stop_training(tmp_path: Path) -> None:
    from greentrain.errors import DeviceLostError

    clock = FrozenClock(T0)
    gpu = fake_gpu(clock)
    with session_for(tmp_path, clock, gpu) as session:
        for step in range(STEPS):
            if step == 6:
                gpu.fail(DeviceLostError(f"GPU {gpu.uuid}: GPU_IS_LOST"))
            clock.advance(BASE_STEP_S)
            session.step()
        notes = [n for n in session.engine.notes if n.startswith("power control off")]
    assert session.finished and session.engine.progress.steps_done == STEPS
    assert len(notes) == 1 and "GPU_IS_LOST" in notes[0]


def test_limit_restored_when_the_loop_raises(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    gpu = fake_gpu(clock)
    with pytest.raises(RuntimeError, match="boom"), session_for(tmp_path, clock, gpu) as session:
        for _ in range(6):  # mid-sweep: the limit is below the default
            clock.advance(gpu.step_time_s(BASE_STEP_S))
            session.step()
        assert gpu.power_limit_w() < gpu.power_limit_constraints().default_w
        raise RuntimeError("boom")
    assert gpu.power_limit_w() == gpu.power_limit_constraints().default_w


KILLED_MID_JOB = """
import os, signal, sys
from greentrain.actuators import ActuatorSet
from greentrain.policies.base import Decision
from greentrain.testing import FileBackedGPU
acts = ActuatorSet([FileBackedGPU(sys.argv[2], "a40")], state_dir=sys.argv[1], job="killed")
acts.recover()
acts.apply(Decision(power_limit_w=150.0))
os.kill(os.getpid(), signal.SIGKILL)  # no exit path runs: only the journal remembers
"""


def test_session_start_restores_what_a_killed_predecessor_left(tmp_path: Path) -> None:
    gpu_file, state = tmp_path / "gpu.json", tmp_path / "state"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", KILLED_MID_JOB, str(state), str(gpu_file)], env=env, timeout=60, check=False)
    assert done.returncode == -9
    gpu = FileBackedGPU(gpu_file, "a40")
    assert gpu.power_limit_w() == 150.0
    clock = FrozenClock(T0)
    with Session("energy-optimal", steps_total=STEPS, clock=clock, devices=DeviceSet([gpu], [], []),
                 relaunch="none", pause_mode="suspend", progress=False, state_dir=state,
                 profile_cache_dir=False) as session:
        assert gpu.is_default()  # recovered at __enter__, before the first step
        clock.advance(BASE_STEP_S)
        session.step()
    assert gpu.is_default()


def test_timing_policy_leaves_power_alone_unless_asked(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    gpu = fake_gpu(clock)
    with session_for(tmp_path, clock, gpu, policy=PauseAtSteps(set())) as session:
        run_steps(session, clock, gpu, [])
        assert session.hardware.profiler is None and session.hardware.actuators is None
    assert gpu.set_calls == []
    with session_for(tmp_path / "forced", clock, gpu, policy=PauseAtSteps(set()), power=True) as session:
        assert session.hardware.profiler is not None  # power=True profiles even for a timing policy


def test_bad_power_switch_is_a_config_error(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    with pytest.raises(ConfigError, match="power"), session_for(tmp_path, clock, fake_gpu(clock), power="yes"):
        pass


def test_precision_trial_on_cpu_picks_the_cheaper_precision(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    clock = FrozenClock(T0)
    seen: list[tuple[str, torch.dtype]] = []
    with Session(PauseAtSteps(set()), steps_total=30, clock=clock, devices=False, relaunch="none",
                 pause_mode="suspend", progress=False, precision=["fp32", "bf16"]) as session:
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))  # one batch: the loss only falls
        for _ in range(30):
            with session.autocast():
                out = model(x)
                loss = nn.functional.mse_loss(out.float(), x[:, :1])
            seen.append((session.precision, out.dtype))
            session.backward(loss, opt)
            clock.advance(1.0 if session.precision == "fp32" else 0.6)  # bf16 steps measured faster
            session.step(loss=loss.detach())
        assert session.precision == "bf16"
    assert ("fp32", torch.float32) in seen and ("bf16", torch.bfloat16) in seen
    assert {p for p, _ in seen} == {"fp32", "bf16"}
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_precision_rejects_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="precision"):  # refused by JobOptions, before anything starts
        Session(PauseAtSteps(set()), devices=False, relaunch="none", progress=False, precision="bf16")
