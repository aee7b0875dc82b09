"""One line per decision, and it is kept: the terminal, the run log and the summary give the same resume time
(issue 38, build 5); a re-plan that changes its mind never contradicts a line already printed."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import TraceSignals, hourly, varying  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, DeadlineGuard, Engine, Progress
from greentrain.engine.resumenotice import ResumeNotice, kept_resume
from greentrain.events import EventLog, read_events
from greentrain.job.announce import summary_text
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, Policy, Snapshot

T0 = datetime(2022, 6, 1, 0, tzinfo=UTC)
RESUME = T0 + timedelta(hours=4)
pytestmark = pytest.mark.timeout(60)


class HourlyLookPolicy(Policy):
    """Pauses until the end of each hour (its next look) while the plan says: run from 04:00 (a per-interval
    policy, as carbon-aware and forecast-optimal are); ``flip`` makes every other re-plan during the wait
    say 'run now' and the next one 'pause' again (a policy at its margin)."""

    name = "test-hourly-look"

    def __init__(self, resume: datetime, *, flip: bool = False) -> None:
        self.resume = resume
        self.flip = flip
        self.calls = 0

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        self.calls += 1
        if now >= self.resume or snapshot.state == JobState.WAITING:  # starts, then pauses after a step
            return Decision(action=Action.RUN, reason="clean now")
        if self.flip and snapshot.state == JobState.PAUSED and self.calls % 2 == 0:
            return Decision(action=Action.RUN, reason="margin: running")
        look = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        return Decision(action=Action.PAUSE, until=look, reason="dirty hours",
                        plan=((self.resume, self.resume + timedelta(hours=2)),))


def _engine(tmp_path: Path, policy: Policy, clock: FrozenClock | None = None) -> tuple[Engine, FrozenClock]:
    clock = clock or FrozenClock(T0)
    engine = Engine(policy,
                    Collaborators(clock=clock, signals=TraceSignals(hourly(T0, varying(300.0, 24)), clock),
                                  event_log=EventLog(tmp_path / "run.jsonl")),
                    progress=Progress(steps_total=20, step_time_s=60.0),
                    deadline=DeadlineGuard(T0 + timedelta(hours=12), simulated=True),
                    decide_interval_s=600.0, countdown=False)
    return engine, clock


def _run_one_pause(engine: Engine, clock: FrozenClock) -> tuple[Decision, datetime]:
    """Start, step once, pause at the first pause decision and wait it out; (the pause, when it ended)."""
    assert engine.begin().action == Action.RUN
    engine.step_begin()
    clock.advance(60.0)
    decision = engine.step_end()
    assert decision.action == Action.PAUSE, decision
    engine.wait_until(decision.until, decision.reason)
    return decision, clock.now()


def test_the_terminal_the_run_log_and_the_summary_give_the_same_resume(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    engine, clock = _engine(tmp_path, HourlyLookPolicy(RESUME))
    decision, ended = _run_one_pause(engine, clock)
    engine.close()
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("greentrain:")]
    assert err == ["greentrain: paused until 2022-06-01 04:00 UTC (simulated) (dirty hours)"], err
    assert ended == RESUME, "the job resumed at the time it was told"
    events = read_events(tmp_path / "run.jsonl")
    paused = [e for e in events if e["event"] == "state" and e["state"] == "paused"]
    assert [e["until"] for e in paused] == ["2022-06-01T04:00:00Z"], paused
    pause = [e for e in events if e["event"] == "action" and e["action"] == "pause"]
    assert pause[0]["until"] == "2022-06-01T04:00:00Z" and pause[0]["next_look"] == "2022-06-01T01:00:00Z"
    # The hourly looks moved the wait's wake-up, not the resume: no re-plan event, no line.
    assert not [e for e in events if e["event"] == "action" and e["action"] == "replan"]
    # A checkpoint pause's summary gives the same time (Session and the callbacks pass engine.resume_of).
    resume_at = engine.resume_of(decision, T0 + timedelta(minutes=1))
    assert resume_at == RESUME
    assert "paused until 2022-06-01 04:00 UTC (simulated)" in summary_text(engine, sources={}, finished=False,
                                                                            paused_until=resume_at)


def test_a_policy_that_changes_its_mind_never_contradicts_a_printed_line(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    engine, clock = _engine(tmp_path, HourlyLookPolicy(RESUME, flip=True))
    _decision, ended = _run_one_pause(engine, clock)
    engine.close()
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("greentrain:")]
    assert err[0] == "greentrain: paused until 2022-06-01 04:00 UTC (simulated) (dirty hours)"
    assert "instead of" not in "\n".join(err) and "later moves" not in "\n".join(err)
    # Either the wait ended early, and exactly one line says when (the time it really ended), or none.
    assert len(err) <= 2, err
    if ended < RESUME - timedelta(minutes=1):
        assert err[1].startswith(f"greentrain: resuming at {ended:%Y-%m-%d %H:%M} UTC (simulated), before the "
                                 "2022-06-01 04:00 UTC (simulated) announced"), err
    else:
        assert len(err) == 1, err


def test_a_later_resume_is_said_once_when_the_announced_time_comes() -> None:
    said: list[str] = []
    logged: list[tuple[datetime, datetime]] = []
    notice = ResumeNotice(say=said.append, log_until=lambda now, until: logged.append((now, until)),
                          fmt=lambda t: f"{t:%H:%M}")
    notice.open("paused", RESUME, "dirty hours")
    assert notice.check(T0 + timedelta(hours=1), T0 + timedelta(hours=6), "worse") is None, "not yet at 04:00"
    assert notice.check(T0 + timedelta(hours=2), T0 + timedelta(hours=4), "better") is None
    line = notice.check(RESUME, T0 + timedelta(hours=6), "forecast moved")
    assert line == "greentrain: still paused at 04:00: resume moved from 04:00 to 06:00 (forecast moved)"
    assert logged == [(RESUME, T0 + timedelta(hours=6))], "the run log gets the same time"
    assert notice.close(T0 + timedelta(hours=6), "clean", interrupted=False) is None, "resumed as announced"
    assert said == ["greentrain: paused until 04:00 (dirty hours)", line]


def test_an_interrupted_wait_says_no_resume() -> None:
    said: list[str] = []
    notice = ResumeNotice(say=said.append, log_until=lambda now, until: None, fmt=lambda t: f"{t:%H:%M}")
    notice.open("paused", RESUME, "")
    assert notice.close(T0 + timedelta(hours=1), "clean", interrupted=True) is None
    assert said == ["greentrain: paused until 04:00"]


def test_the_kept_resume_is_the_plans_clamped_by_the_guard() -> None:
    pause = Decision(action=Action.PAUSE, until=T0 + timedelta(hours=1), reason="x",
                     plan=((RESUME, RESUME + timedelta(hours=1)),))
    assert kept_resume(pause, T0, None) == RESUME
    assert kept_resume(pause, T0, T0 + timedelta(hours=2)) == T0 + timedelta(hours=2)
    assert kept_resume(Decision(action=Action.PAUSE, until=T0 + timedelta(hours=1)), T0, None) == T0 + timedelta(hours=1)
    assert kept_resume(Decision(action=Action.RUN), T0, None) is None


@pytest.mark.parametrize("moved_h", [0, 1])
def test_a_relaunch_inside_a_checkpoint_pause_continues_that_wait(tmp_path: Path, moved_h: int) -> None:
    """A checkpoint pause ends the process; the relaunch, still before the resume, waits on. The run log holds
    one ``pause`` action for the one wait; a resume the relaunch moves is a ``replan`` from the announced one."""
    from greentrain.job.state import restore_into, state_of

    engine, clock = _engine(tmp_path, HourlyLookPolicy(RESUME))
    engine.begin()
    engine.step_begin()
    clock.advance(60)
    decision = engine.step_end()
    assert decision.action == Action.PAUSE
    announced = engine.resume_of(decision)
    assert announced == RESUME
    saved = state_of(engine, "job", resume_at=announced, finished=False)
    engine.close()

    clock.advance(300)  # the relaunch, five minutes later
    later = RESUME + timedelta(hours=moved_h)
    relaunched, _ = _engine(tmp_path, HourlyLookPolicy(later), clock)
    restore_into(relaunched, saved)
    assert relaunched.begin().action == Action.PAUSE
    assert relaunched.resume_of(relaunched.last_decision()) == later
    relaunched.close()
    actions = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "action"]
    assert [e["action"] for e in actions if e["action"] == "pause"] == ["pause"], "one wait, one pause"
    replans = [e for e in actions if e["action"] == "replan"]
    if moved_h:
        assert len(replans) == 1
        assert (replans[0]["previous_until"], replans[0]["until"]) == (RESUME.isoformat().replace("+00:00", "Z"),
                                                                      later.isoformat().replace("+00:00", "Z"))
    else:
        assert not replans
