"""A job that will miss its deadline says so on stderr when it first becomes likely, once, and again at
the end; the summary event carries the verdict; Session gives the documented exit status (3, strict)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ClockMonitor, RunNowPolicy, TraceSignals, WindowPolicy, hourly, varying  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, DeadlineGuard, Progress
from greentrain.engine import Engine
from greentrain.events import EventLog, read_events
from greentrain.exitcodes import DEADLINE_MISSED_EXIT_CODE
from greentrain.policies.base import Action, Decision, Policy, Snapshot
from greentrain.engine.deadlinewatch import DeadlineWatch

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)
pytestmark = pytest.mark.timeout(60)


def _slow_job(tmp_path: Path, deadline_policy: str, steps: int = 40, planned_s: float = 60.0,
              actual_s: float = 180.0) -> tuple[Engine, FrozenClock]:
    """Planned at 60 s per step (40 min of work in a 1 h deadline); the steps take 3 min each."""
    clock = FrozenClock(T0)
    engine = Engine(RunNowPolicy(),
                    Collaborators(clock=clock, signals=TraceSignals(hourly(T0, varying(100.0, 6)), clock),
                                  monitor=ClockMonitor(clock), event_log=EventLog(tmp_path / "run.jsonl")),
                    progress=Progress(steps_total=steps, step_time_s=planned_s),
                    deadline=DeadlineGuard(T0 + timedelta(hours=1), policy=deadline_policy, simulated=True),
                    decide_interval_s=60.0,
                    countdown=False)
    assert engine.begin().action == Action.RUN
    while not engine.finished:
        engine.step_begin()
        clock.advance(actual_s)
        engine.step_end()
    return engine, clock


def test_slow_steps_warn_once_when_likely_then_missed_at_the_end(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    engine, clock = _slow_job(tmp_path, "strict")
    warned_at = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "deadline_risk"]
    engine.close()
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if "will be missed" in line or "after its deadline" in line]
    assert len(warnings) == 1, err  # once, when it first became likely
    assert warnings[0].startswith("greentrain: WARNING: deadline 2022-03-01 02:00 UTC (simulated) will be missed")
    assert len(warned_at) == 1
    # Likely once the rate is measured (8 steps, engine/stats.py), long before the deadline passed.
    assert datetime.fromisoformat(warned_at[0]["t"].replace("Z", "+00:00")) < T0 + timedelta(minutes=30)
    missed = [line for line in err if "DEADLINE MISSED" in line]
    assert missed == ["greentrain: DEADLINE MISSED: finished 1.0 h after the deadline 2022-03-01 02:00 UTC (simulated)"]
    summary = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "summary"][-1]
    assert summary["deadline_met"] is False and summary["finished_at"] and summary["clock"] == "simulated"
    assert engine.deadline_missed


def test_a_job_that_meets_its_deadline_says_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine, _clock = _slow_job(tmp_path, "strict", actual_s=60.0)
    engine.close()
    assert "deadline" not in capsys.readouterr().err.lower()
    summary = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "summary"][-1]
    assert summary["deadline_met"] is True and not engine.deadline_missed


def test_session_exit_status_is_3_when_strict_and_0_when_best_effort(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from greentrain.session import Session

    for policy, expected in (("strict", DEADLINE_MISSED_EXIT_CODE), ("best-effort", 0)):
        clock = FrozenClock(T0)
        with Session(RunNowPolicy(), provider=TraceSignals(hourly(T0, varying(100.0, 6)), clock), clock=clock,
                     deadline=T0 + timedelta(hours=1), steps_total=30, step_time_s=60.0, monitor=ClockMonitor(clock),
                     pause_mode="suspend", relaunch="none", progress=False, deadline_policy=policy,
                     state_path=tmp_path / f"{policy}.json", decide_interval_s=60.0) as session:
            while not session.finished:
                clock.advance(180.0)
                session.step()
        assert session.deadline_missed
        assert session.deadline_exit_code == expected, policy
    err = capsys.readouterr().err
    assert err.count("DEADLINE MISSED") == 2  # said under both policies


class _FlatOutThenPause(Policy):
    """'no slack; running flat out' first, then (slack regained) a pause: the engine must keep its word."""

    name = "test-flat-out-then-pause"

    def __init__(self) -> None:
        self.calls = 0

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        self.calls += 1
        if self.calls == 1:
            return Decision(action=Action.RUN, reason="no slack left; running flat out", to_the_end=True)
        return Decision(action=Action.PAUSE, until=now + timedelta(hours=1), reason="dirty hour")


def test_no_pause_after_a_decision_that_said_running_flat_out(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    engine = Engine(_FlatOutThenPause(),
                    Collaborators(clock=clock, signals=TraceSignals(hourly(T0, varying(100.0, 12)), clock),
                                  event_log=EventLog(tmp_path / "run.jsonl")),
                    progress=Progress(steps_total=20, step_time_s=60.0),
                    deadline=DeadlineGuard(T0 + timedelta(hours=10), simulated=True),
                    decide_interval_s=60.0,
                    countdown=False)
    engine.begin()
    actions = []
    for _ in range(10):
        engine.step_begin()
        clock.advance(60.0)
        actions.append(engine.step_end().action)
    engine.close()
    assert engine.policy.calls > 1, "the policy was asked again"
    assert set(actions) == {Action.RUN}, actions
    logged = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "action"]
    assert all(e["action"] == "run" for e in logged), logged


def test_without_a_to_the_end_run_a_later_pause_is_still_allowed(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    engine = Engine(WindowPolicy(T0 + timedelta(minutes=5), T0 + timedelta(minutes=30)),
                    Collaborators(clock=clock, signals=TraceSignals(hourly(T0, varying(100.0, 12)), clock)),
                    progress=Progress(steps_total=20, step_time_s=60.0),
                    deadline=DeadlineGuard(T0 + timedelta(hours=10), simulated=True),
                    decide_interval_s=60.0,
                    countdown=False)
    engine.begin()
    actions = []
    for _ in range(8):
        engine.step_begin()
        clock.advance(60.0)
        actions.append(engine.step_end().action)
    engine.close()
    assert Action.PAUSE in actions


def test_watch_projects_from_the_measured_rate_and_speaks_once() -> None:
    said: list[str] = []
    watch = DeadlineWatch(T0 + timedelta(hours=1), say=said.append)
    assert watch.check(T0, 1800.0, step_time_s=10.0) is None and not said
    assert watch.check(T0, 7200.0, step_time_s=40.0) is not None
    assert watch.check(T0, 9000.0, step_time_s=50.0) is None  # once
    assert said == ["greentrain: WARNING: deadline 2022-03-01 02:00 UTC will be missed by about 1.0 h at the "
                    "measured 40 s per step; running flat out"]
    assert watch.verdict(T0 + timedelta(minutes=59)).met
    assert not watch.verdict(T0 + timedelta(hours=2)).met
    assert watch.verdict(None).finished_at is None


def test_a_rate_probe_during_a_delayed_start_moves_the_start_up(tmp_path: Path) -> None:
    """Planned at 36 s per step (1 h of work), the policy delays the start 10 h; while it waits the probe
    says steps now take 360 s (10 h of work): the deadline guard starts the job hours early."""
    from greentrain.clock import ReplayClock

    clock = ReplayClock(T0, speedup=3600.0)  # one trace hour per real second
    probes: list[float] = []

    def probe() -> float:
        probes.append(360.0)
        return 360.0

    engine = Engine(WindowPolicy(T0, T0 + timedelta(hours=10)),
                    Collaborators(clock=clock, signals=TraceSignals(hourly(T0, varying(100.0, 14)), clock)),
                    progress=Progress(steps_total=100, step_time_s=36.0, rate_probe=probe),
                    deadline=DeadlineGuard(T0 + timedelta(hours=12), simulated=True),
                    decide_interval_s=300.0,
                    countdown=False)
    decision = engine.begin()
    assert decision.action == Action.DELAY_START and decision.until == T0 + timedelta(hours=10)
    engine.wait_until(decision.until, decision.reason)
    started = clock.now()
    engine.close()
    assert probes, "the engine asked the probe while it waited"
    assert started < T0 + timedelta(hours=2), f"started at {started}, not moved up by the measured rate"


def test_a_session_start_that_fails_leaves_no_state_to_resume(tmp_path: Path) -> None:
    """An impossible deadline refused at the start must not be remembered as the job's deadline: the next
    start with '+H' counts from itself, not from the failed one."""
    from greentrain.errors import DeadlineError
    from greentrain.session import Session

    clock = FrozenClock(T0)
    state = tmp_path / "state.json"

    def session(deadline: str) -> Session:
        return Session(RunNowPolicy(), provider=TraceSignals(hourly(T0, varying(100.0, 48)), clock), clock=clock,
                       deadline=deadline, steps_total=10, step_time_s=3600.0, monitor=ClockMonitor(clock),
                       pause_mode="suspend", relaunch="none", progress=False, state_path=state)

    with pytest.raises(DeadlineError, match="leaves 2.0 h but the remaining work needs 10.0 h"):
        with session("+2"):
            pass
    assert not state.exists()
    clock.advance(3600.0)
    with session("+12") as s:
        assert s.engine is not None and s.engine.deadline.at == T0 + timedelta(hours=13)
