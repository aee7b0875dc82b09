"""Deadline warnings and plans wait for a stable rate (issue 38, build 5): a first step that includes an
evaluation, or one evaluation step later, neither warns of a missed deadline nor plans a pause."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import RunNowPolicy, TraceSignals, drive, hourly, varying  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, DeadlineGuard, Engine, Progress
from greentrain.engine.decider import UNSETTLED
from greentrain.events import EventLog, read_events
from greentrain.policies.base import Action, Decision, Policy, Snapshot

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)
pytestmark = pytest.mark.timeout(60)

EVAL_S, STEP_S, STEPS = 600.0, 30.0, 100


def _with_evaluations(done: int) -> float:
    """30 s steps; the first one and the sixth include an evaluation of 10 min (the job fits in 2 h)."""
    return EVAL_S if done in (0, 5) else STEP_S


def _engine(tmp_path: Path, policy: Policy, deadline_h: float = 2.0) -> tuple[Engine, FrozenClock]:
    clock = FrozenClock(T0)
    engine = Engine(policy,
                    Collaborators(clock=clock, signals=TraceSignals(hourly(T0, varying(200.0, 6)), clock),
                                  event_log=EventLog(tmp_path / "run.jsonl")),
                    progress=Progress(steps_total=STEPS),  # no step-time estimate: only what is measured
                    deadline=DeadlineGuard(T0 + timedelta(hours=deadline_h), simulated=True),
                    decide_interval_s=60.0, countdown=False)
    return engine, clock


def test_an_evaluation_in_the_first_step_gives_no_deadline_warning(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    engine, clock = _engine(tmp_path, RunNowPolicy())
    drive(engine, clock, step_s=_with_evaluations)
    engine.close()
    err = capsys.readouterr().err
    assert "WARNING" not in err and "deadline" not in err.lower(), err
    events = read_events(tmp_path / "run.jsonl")
    assert not [e for e in events if e["event"].startswith("deadline_risk")]
    assert engine.finished and not engine.deadline_missed
    assert engine.progress.times.mean_s == pytest.approx(STEP_S), "the median of recent steps, evaluations aside"


def test_a_job_that_really_is_too_slow_still_warns_once_its_rate_settles(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    engine, clock = _engine(tmp_path, RunNowPolicy(), deadline_h=0.5)  # 50 min of work in 30 min
    drive(engine, clock, step_s=_with_evaluations)
    engine.close()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "will be missed" in line]
    assert len(warnings) == 1 and "at the measured 30 s per step" in warnings[0], warnings
    risk = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "deadline_risk"]
    # Said once the rate settled: eight steps after the warm-up step, not at the first one.
    assert datetime.fromisoformat(risk[0]["t"].replace("Z", "+00:00")) >= T0 + timedelta(seconds=EVAL_S + 8 * STEP_S)


class PlannedPause(Policy):
    """Plans a pause (a plan and a saving, like the carbon planners) at every decision while running."""

    name = "test-planned-pause"

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        if snapshot.state.value != "running":
            return Decision(action=Action.RUN, reason="start")
        resume = now + timedelta(minutes=30)
        return Decision(action=Action.PAUSE, until=resume, reason="planned", saving_g=1.0,
                        plan=((resume, resume + timedelta(hours=1)),))


def test_no_wait_is_planned_from_the_first_steps(tmp_path: Path) -> None:
    engine, clock = _engine(tmp_path, PlannedPause(), deadline_h=12.0)
    assert engine.begin().action == Action.RUN
    decisions = []
    for done in range(12):
        engine.step_begin()
        clock.advance(_with_evaluations(done))
        decision = engine.step_end()
        decisions.append(decision)
        if decision.action == Action.PAUSE:
            break
    engine.close()
    first_pause = next(i for i, d in enumerate(decisions) if d.action == Action.PAUSE)
    # Planned once three steps after the warm-up step were measured (their median: 30 s, not the evaluation).
    assert first_pause == 3, decisions
    events = read_events(tmp_path / "run.jsonl")
    assert any(e["event"] == "action" and e["reason"] == UNSETTLED for e in events)
