"""Ctrl-C inside a Session: one line, exit 130, and the next start resumes from the last checkpoint with the
work since counted as lost energy, never as progress (issue 38, builds 3 and 4); a deadline given again on a
restart wins over the stored one, with one line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from gt_engine_doubles import TraceSignals, hourly, varying  # noqa: E402
from gt_session_loop import PauseAtSteps, make_model, train_step  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.events import read_events
from greentrain.session import INTERRUPTED_EXIT_CODE, Session

SCRIPT = Path(__file__).parent / "gt_interrupt_job.py"
STEPS = 30


def lifetime(workdir: Path, *, pauses: str = "", sigint_at: int = -1, deadline: str = "+2"
             ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ELECTRICITYMAPS", "WATTTIME", "GREENTRAIN_"))}
    env.update(OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(SCRIPT), str(workdir), str(STEPS), pauses, str(sigint_at), deadline],
                          capture_output=True, text=True, timeout=100, env=env)


def steps_run(workdir: Path) -> list[tuple[str, int]]:
    return [(pid, int(step)) for pid, step in (line.split() for line in
                                                (workdir / "steps.txt").read_text().splitlines())]


def state(workdir: Path) -> dict[str, object]:
    return json.loads((workdir / "ckpt" / "greentrain-state.json").read_text())


def greentrain_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("greentrain:")]


@pytest.mark.timeout(240)
def test_ctrl_c_before_the_first_checkpoint_resumes_from_zero_with_the_energy_lost(tmp_path: Path) -> None:
    first = lifetime(tmp_path, sigint_at=19)
    assert first.returncode == INTERRUPTED_EXIT_CODE, first.stderr
    assert "Traceback" not in first.stderr and "KeyboardInterrupt" not in first.stderr
    said = greentrain_lines(first.stderr)
    assert said[-1].startswith("greentrain: interrupted at step 20; the next start resumes at step 0: 20 steps "
                               "since the last checkpoint lost"), said
    assert not any("done:" in line for line in said), "Ctrl-C says one line, not the summary"
    kept = state(tmp_path)
    assert kept["steps_done"] == 0 and kept["lost_steps"] == 20 and kept["tokens"] == 0
    assert kept["lost_energy_j"] > 0 and kept["energy_j"] == pytest.approx(kept["lost_energy_j"])
    assert kept["counterfactual_g"] == 0.0, "lost work avoids nothing"

    second = lifetime(tmp_path)  # the same command again: a clean start from step 0
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr and "DeadlineError" not in second.stderr
    assert second.stdout.strip().endswith("finished")
    rows = steps_run(tmp_path)
    pids = list(dict.fromkeys(pid for pid, _ in rows))
    assert [s for pid, s in rows if pid == pids[1]] == list(range(STEPS)), "the resume starts at 0, all steps once"
    summary = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "summary"]
    assert summary[0]["interrupted"] is True and summary[0]["lost_steps"] == 20
    assert summary[-1]["lost_steps"] == 20 and summary[-1]["lost_energy_j"] == pytest.approx(kept["lost_energy_j"])
    done = [line for line in greentrain_lines(second.stderr) if "done:" in line]
    assert len(done) == 1 and f"{STEPS}/{STEPS} steps" in done[0] and "lost" in done[0]
    assert "net avoided" not in done[0], "work thrown away avoided nothing"


@pytest.mark.timeout(240)
def test_ctrl_c_after_a_checkpoint_resumes_there(tmp_path: Path) -> None:
    assert lifetime(tmp_path, pauses="10").stdout.strip().endswith("stopped")
    second = lifetime(tmp_path, pauses="10", sigint_at=14)
    assert second.returncode == INTERRUPTED_EXIT_CODE and "Traceback" not in second.stderr
    assert greentrain_lines(second.stderr)[-1].startswith(
        "greentrain: interrupted at step 15; the next start resumes at step 10: 5 steps since the last checkpoint lost")
    kept = state(tmp_path)
    assert kept["steps_done"] == 10 and kept["lost_steps"] == 5
    third = lifetime(tmp_path, pauses="10")
    assert third.returncode == 0 and third.stdout.strip().endswith("finished"), third.stderr
    rows = steps_run(tmp_path)
    pids = list(dict.fromkeys(pid for pid, _ in rows))
    assert [s for pid, s in rows if pid == pids[0]] == list(range(10))
    assert [s for pid, s in rows if pid == pids[1]] == list(range(10, 15))
    assert [s for pid, s in rows if pid == pids[2]] == list(range(10, STEPS))


T0 = datetime(2022, 2, 1, 0, tzinfo=UTC)


@pytest.mark.timeout(90)
def test_a_deadline_given_again_on_restart_wins_with_one_line(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(200, 200)), clock)
    deadlines: list[datetime | None] = []

    def one(deadline: str, interrupt_at: int | None = None) -> Session:
        model, opt = make_model()
        session = Session(PauseAtSteps({5}), provider=signals, steps_total=20, model=model, optimizer=opt,
                          checkpoint_dir=tmp_path / "ckpt", clock=clock, relaunch="none", devices=False,
                          progress=False, decide_interval_s=1, step_time_s=60.0, deadline=deadline)
        with session:
            deadlines.append(session.engine.deadline.at)
            for step in range(session.start_step, 20):
                train_step(model, opt, step)
                clock.advance(60)
                session.step()
                if step == interrupt_at:
                    raise KeyboardInterrupt
                if session.should_stop:
                    break
        return session

    assert one("+2").engine.deadline.at == T0 + timedelta(hours=2)
    clock.advance(600)
    with pytest.raises(SystemExit) as stopped:
        one("+2", interrupt_at=8)  # the same '+2' again: still two hours from the first start
    assert stopped.value.code == INTERRUPTED_EXIT_CODE
    assert deadlines == [T0 + timedelta(hours=2)] * 2
    clock.advance(600)
    with caplog.at_level(logging.INFO, logger="greentrain"):
        later = one("+48")
    restart = clock.now() - timedelta(minutes=(20 - 5))
    assert later.engine.deadline.at == restart + timedelta(hours=48) and later.finished
    said = [r.getMessage() for r in caplog.records if "replaces" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("greentrain: deadline ") and "(given now) replaces" in said[0]


@pytest.mark.timeout(90)
def test_ctrl_c_while_saving_waits_for_the_checkpoint_and_its_state(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    import signal

    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(200, 200)), clock)
    store: dict[str, int] = {}

    def save(next_step: int) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the save
        store["step"] = next_step

    caplog.set_level(logging.INFO, logger="greentrain")
    with pytest.raises(SystemExit) as stopped:
        with Session(PauseAtSteps({6}), provider=signals, steps_total=20, save=save, load=lambda: store.get("step"),
                     clock=clock, relaunch="none", devices=False, progress=False, decide_interval_s=1,
                     step_time_s=60.0, state_path=tmp_path / "state.json") as session:
            for _step in range(session.start_step, 20):
                clock.advance(60)
                session.step()
                if session.should_stop:
                    break
    assert stopped.value.code == INTERRUPTED_EXIT_CODE
    assert store == {"step": 6}, "the save ran to its end"
    kept = json.loads((tmp_path / "state.json").read_text())
    assert kept["steps_done"] == 6 and kept["lost_steps"] == 0, "and its state after it"
    assert caplog.records[-1].getMessage() == (
        "greentrain: interrupted at step 6; the next start resumes at step 6: nothing lost")


class InterruptedAtStart(PauseAtSteps):
    """Ctrl-C while the job plans its start (as during a delayed start's wait)."""

    def decide(self, snapshot, now):
        raise KeyboardInterrupt


@pytest.mark.timeout(60)
def test_ctrl_c_before_the_first_step_is_one_line_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = FrozenClock(T0)
    caplog.set_level(logging.INFO, logger="greentrain")
    with pytest.raises(SystemExit) as stopped:
        with Session(InterruptedAtStart(set()), provider=TraceSignals(hourly(T0, varying(200, 10)), clock),
                     steps_total=5, clock=clock, relaunch="none", devices=False,
                     progress=False, step_time_s=60.0, state_path=tmp_path / "state.json"):
            pytest.fail("the body never runs")
    assert stopped.value.code == INTERRUPTED_EXIT_CODE
    assert caplog.records[-1].getMessage() == (
        "greentrain: interrupted at step 0; the next start resumes at step 0: nothing lost")
    assert not (tmp_path / "state.json").exists(), "a job that never started leaves no state"


@pytest.mark.timeout(90)
def test_a_program_that_saves_on_its_own_tells_the_session(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    store: dict[str, int] = {}

    def one(interrupt_at: int | None) -> Session:
        session = Session("run-now", steps_total=20, save=lambda s: store.update(step=s),
                          load=lambda: store.get("step"), clock=clock, relaunch="none", devices=False, progress=False,
                          state_path=tmp_path / "state.json")
        with session:
            for step in range(session.start_step, 20):
                clock.advance(60)
                session.step()
                if (step + 1) % 5 == 0:  # its own checkpoint every 5 steps
                    store["step"] = step + 1
                    session.saved(step + 1)
                if step == interrupt_at:
                    raise KeyboardInterrupt
        return session

    with pytest.raises(SystemExit):
        one(interrupt_at=12)
    kept = json.loads((tmp_path / "state.json").read_text())
    assert (kept["steps_done"], kept["lost_steps"]) == (10, 3), "only the steps after its last save are lost"
    assert one(interrupt_at=None).start_step == 10
