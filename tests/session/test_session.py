"""Session: pause/resume through a real CPU training loop loses no step and is bit-identical."""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from gt_engine_doubles import ThresholdPolicy, TraceSignals, hourly, varying  # noqa: E402
from gt_session_loop import PauseAtSteps, make_model, reference_losses, train_step  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.errors import ConfigError
from greentrain.events import read_events
from greentrain.policies.base import Action
from greentrain.session import Session

T0 = datetime(2022, 2, 1, 0, tzinfo=UTC)
STEPS = 40
STEP_S = 60.0


def run_segments(tmp_path: Path, policy, clock, signals, **kwargs) -> tuple[dict[int, list[float]], int]:
    """Run the job as a sequence of 'process lifetimes' (fresh model objects each time) until finished."""
    losses: dict[int, list[float]] = {}
    lifetimes = 0
    while True:
        lifetimes += 1
        assert lifetimes < 20
        torch.manual_seed(12345 + lifetimes)  # a new process would not share our RNG state
        model, opt = make_model()
        with Session(policy, provider=signals, steps_total=STEPS, model=model, optimizer=opt,
                     checkpoint_dir=tmp_path / "ckpt", clock=clock, relaunch="none", devices=False,
                     progress=False, decide_interval_s=1, jsonl=tmp_path / "run.jsonl", **kwargs) as session:
            for step in range(session.start_step, STEPS):
                loss = train_step(model, opt, step)
                losses.setdefault(step, []).append(loss.item())
                clock.advance(STEP_S)
                session.step(tokens=32, loss=loss)
                if session.should_stop:
                    break
        if session.finished:
            return losses, lifetimes


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_checkpoint_pauses_lose_no_step_and_are_bit_identical(tmp_path: Path, seed: int) -> None:
    pause_after = set(random.Random(seed).sample(range(1, STEPS - 1), 3))
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(200, 200)), clock)
    losses, lifetimes = run_segments(tmp_path, PauseAtSteps(pause_after), clock, signals)
    assert lifetimes == len(pause_after) + 1
    assert sorted(losses) == list(range(STEPS)), "every step ran"
    assert all(len(v) == 1 for v in losses.values()), "no step ran twice"
    assert [losses[i][0] for i in range(STEPS)] == reference_losses(STEPS)  # exact equality, not approx
    events = read_events(tmp_path / "run.jsonl")
    assert [e["step"] for e in events if e["event"] == "step"] == list(range(1, STEPS + 1))
    assert sum(1 for e in events if e["event"] == "action" and e["action"] == "pause") == len(pause_after)


@pytest.mark.timeout(60)
def test_suspend_mode_waits_in_process(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [100, 500, 100, 100, 100]), clock)
    model, opt = make_model()
    losses = []
    with Session(ThresholdPolicy(200), provider=signals, steps_total=STEPS * 3, clock=clock, pause_mode="suspend",
                 devices=False, progress=False, decide_interval_s=60,
                 deadline=T0 + timedelta(hours=5)) as session:
        for step in range(session.start_step, STEPS * 3):
            losses.append(train_step(model, opt, step).item())
            clock.advance(STEP_S)
            decision = session.step()
            if decision.action == Action.PAUSE:
                paused_at_step = session.step_index
                assert clock.now() == T0 + timedelta(hours=2)  # step() returned after the dirty hour
            assert not session.should_stop
    assert paused_at_step == 60
    assert losses == reference_losses(STEPS * 3)
    assert session.job_stats.snapshot().steps_total == STEPS * 3


@pytest.mark.timeout(60)
def test_a_state_file_left_by_another_process_with_this_pid_is_not_resumed(tmp_path: Path) -> None:
    """exec keeps the pid, so a one-process job keeps its state in /tmp/greentrain-JOB-PID.json; a container
    reuses pid 1, so a file there from an earlier run must not move the clock or the start step."""
    import os
    import tempfile

    from greentrain.job.state import EngineState, save_state

    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [100] * 6), clock)
    probe = Session(ThresholdPolicy(200), provider=signals, steps_total=4, clock=clock, devices=False)
    stale = Path(tempfile.gettempdir()) / f"greentrain-{probe.job}-{os.getpid()}.json"
    save_state(EngineState(job=probe.job, steps_done=3, clock_at="2026-11-27T00:00:00+00:00"), stale)
    try:
        with Session(ThresholdPolicy(200), provider=signals, steps_total=4, clock=clock, devices=False,
                     progress=False, deadline=T0 + timedelta(hours=5)) as session:
            assert session.start_step == 0
            assert clock.now() == T0
            for _ in range(4):
                clock.advance(STEP_S)
                session.step()
        assert session.finished
    finally:
        stale.unlink(missing_ok=True)


@pytest.mark.timeout(60)
def test_user_save_load_callbacks_and_relative_deadline_survive_relaunch(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(200, 48)), clock)
    store: dict[str, object] = {}
    deadlines = []

    def lifetime() -> Session:
        model, opt = make_model()
        if "state" in store:
            model.load_state_dict(store["state"])

        def save(next_step: int) -> None:
            store["state"] = {k: v.clone() for k, v in model.state_dict().items()}
            store["step"] = next_step

        with Session(PauseAtSteps({5}), provider=signals, steps_total=10, save=save, load=lambda: store.get("step"),
                     clock=clock, relaunch="none", devices=False, progress=False, decide_interval_s=1,
                     deadline="+12", state_path=tmp_path / "state.json") as session:
            deadlines.append(session.engine.deadline.at)
            for step in range(session.start_step, 10):
                train_step(model, opt, step)
                clock.advance(STEP_S)
                session.step()
                if session.should_stop:
                    break
        return session

    first = lifetime()
    assert first.should_stop and store["step"] == 5 and first.resume_at == T0 + timedelta(minutes=5, hours=1)
    clock.advance(3 * 3600)
    second = lifetime()
    assert second.start_step == 5 and second.finished
    assert deadlines == [T0 + timedelta(hours=12)] * 2, "'+12' counts from the first start"


@pytest.mark.timeout(30)
def test_bad_arguments_are_config_errors(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    with pytest.raises(ConfigError, match="pause_mode 'checkpoint' needs"):
        Session(PauseAtSteps(set()), pause_mode="checkpoint", clock=clock, devices=False).__enter__()
    with pytest.raises(ConfigError, match="save/load"):
        Session(PauseAtSteps(set()), save=lambda s: None)
    with pytest.raises(ConfigError, match="checkpoint_dir"):
        Session(PauseAtSteps(set()), model=torch.nn.Linear(1, 1))
    with pytest.raises(ConfigError, match="deadline"):
        with Session(PauseAtSteps(set()), deadline="2022-02-02T00:00", clock=clock, devices=False):
            pass
    with pytest.raises(ConfigError, match="Session.step"):
        Session(PauseAtSteps(set())).step()


@pytest.mark.timeout(60)
def test_metrics_endpoint_and_real_monitor(tmp_path: Path) -> None:
    """With metrics_port the session serves Prometheus metrics from the same JobStats; energy is measured."""
    import httpx

    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(250, 10)), clock)
    model, opt = make_model()
    with Session(ThresholdPolicy(500), provider=signals, steps_total=20, clock=clock, job="metrics-test",
                 metrics_port=0, progress=False, pause_mode="suspend") as session:
        for step in range(20):
            train_step(model, opt, step)
            clock.advance(STEP_S)
            session.step(tokens=64)
        port = session.metrics.port
        body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        stats = session.job_stats.snapshot()
    assert 'greentrain_training_steps_total{job="metrics-test"} 20.0' in body
    assert 'greentrain_training_tokens_total{job="metrics-test"} 1280.0' in body
    assert stats.energy_j > 0, "the real monitor (CPU estimate here) measured the steps"
    assert stats.emissions_g == pytest.approx(stats.energy_j / 3.6e6 * 250, rel=1e-9)


@pytest.mark.timeout(60)
def test_emissions_avoided_survive_a_checkpoint_relaunch(tmp_path: Path) -> None:
    """Run-now would have run steps 60-89 in the dirty hour; the relaunched process still prices that."""
    from gt_engine_doubles import ClockMonitor

    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [100, 500, 500, 100, 100, 100]), clock)
    store: dict[str, int] = {}
    sessions = []
    while True:
        monitor = ClockMonitor(clock, power_w=120.0)
        with Session(ThresholdPolicy(200), provider=signals, steps_total=90, save=lambda s: store.update(step=s),
                     load=lambda: store.get("step"), clock=clock, relaunch="none", monitor=monitor,
                     progress=False, decide_interval_s=60, deadline="+6", state_path=tmp_path / "st.json",
                     jsonl=tmp_path / "run.jsonl") as session:
            for _step in range(session.start_step, 90):
                clock.advance(STEP_S)
                session.step()
                if session.should_stop:
                    break
        sessions.append(session)
        if session.finished:
            break
        clock.advance((session.resume_at - clock.now()).total_seconds())  # as 'exec' would: wait, relaunch
    assert len(sessions) == 2 and store["step"] == 60
    step_kwh = 120 * STEP_S / 3.6e6
    stats = sessions[-1].job_stats.snapshot()
    assert stats.steps_total == 90
    assert stats.emissions_g == pytest.approx(90 * step_kwh * 100)
    assert stats.emissions_avoided_g == pytest.approx(30 * step_kwh * 400)
    summary = read_events(tmp_path / "run.jsonl")[-1]
    assert summary["event"] == "summary" and summary["emissions_avoided_g"] == pytest.approx(30 * step_kwh * 400)


@pytest.mark.timeout(60)
def test_exit_relaunch_tells_the_slurm_template_when_to_resume(tmp_path: Path, monkeypatch) -> None:
    """relaunch='exit' exits 75 and, under the batch template, writes the planned resume time for the requeue."""
    from greentrain.session import RESUME_EXIT_CODE

    resume_file = tmp_path / "resume-at"
    monkeypatch.setenv("GREENTRAIN_RESUME_FILE", str(resume_file))
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(200, 200)), clock)
    model, opt = make_model()
    with pytest.raises(SystemExit) as exited:
        with Session(PauseAtSteps({5}, pause_s=7200.0), provider=signals, steps_total=STEPS, model=model,
                     optimizer=opt, checkpoint_dir=tmp_path / "ckpt", clock=clock, relaunch="exit",
                     devices=False, progress=False, decide_interval_s=1) as session:
            for step in range(session.start_step, STEPS):
                clock.advance(STEP_S)
                session.step(tokens=32, loss=train_step(model, opt, step))
                if session.should_stop:
                    break
    assert exited.value.code == RESUME_EXIT_CODE
    assert session.resume_at is not None
    written = datetime.fromisoformat(resume_file.read_text().strip()).replace(tzinfo=UTC)
    assert abs((written - session.resume_at).total_seconds()) <= 1.0
