"""Waits: APScheduler re-plans on a ReplayClock, early wake-ups, interrupts, idle energy."""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ClockMonitor, ThresholdPolicy, TraceSignals, WindowPolicy, hourly, varying  # noqa: E402

from greentrain.clock import FrozenClock, ReplayClock
from greentrain.engine import Collaborators, DeadlineGuard, Progress
from greentrain.engine import Engine
from greentrain.engine.waiter import Waiter
from greentrain.jobstats import JobState
from greentrain.policies.base import Action

T0 = datetime(2022, 6, 1, 0, tzinfo=UTC)
SPEEDUP = 36_000.0  # one trace hour = 0.1 s


@pytest.mark.timeout(20)
def test_forecast_change_during_a_pause_wakes_early() -> None:
    clock = ReplayClock(T0, speedup=SPEEDUP)
    points = hourly(T0, [500] * 8 + [100] * 4)
    signals = TraceSignals(points, clock)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=50, step_time_s=60),
                    deadline=DeadlineGuard(T0 + timedelta(hours=12), simulated=True),
                    decide_interval_s=600,
                    countdown=False)
    decision = engine.begin()
    assert decision.action == Action.DELAY_START and decision.until == T0 + timedelta(hours=8)

    def cleaner_grid() -> None:  # the grid turns clean from hour 2 (a new forecast arrives)
        signals.points = hourly(T0, [500, 500] + [100] * 10)

    timer = threading.Timer(0.05, cleaner_grid)
    timer.start()
    try:
        interrupted = engine.wait_until(decision.until, decision.reason)
    finally:
        timer.cancel()
        engine.close()
    assert not interrupted
    woke = clock.now()
    assert T0 + timedelta(hours=2) <= woke < T0 + timedelta(hours=4), woke
    assert engine.waiter.replans >= 1
    assert engine.state == JobState.RUNNING


@pytest.mark.timeout(20)
def test_wait_is_interruptible() -> None:
    clock = ReplayClock(T0, speedup=3600.0)
    signals = TraceSignals(hourly(T0, varying(500, 24)), clock)
    policy = WindowPolicy(T0, T0 + timedelta(days=30))
    engine = Engine(policy,
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=10, step_time_s=1),
                    countdown=False)
    threading.Timer(0.1, engine.interrupt).start()
    interrupted = engine.wait_until(T0 + timedelta(days=30), "long pause")
    engine.close()
    assert interrupted
    assert clock.now() < T0 + timedelta(hours=2)


@pytest.mark.timeout(20)
def test_guard_cuts_a_wait_short_and_idle_energy_counts_against_avoided() -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(300, 24)), clock)
    monitor = ClockMonitor(clock, power_w=200.0, idle_w=50.0)
    deadline = T0 + timedelta(hours=3)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals, monitor=monitor),
                    progress=Progress(steps_total=60, step_time_s=60),
                    deadline=DeadlineGuard(deadline, simulated=True),
                    countdown=False)
    engine.begin()
    engine.wait_until(T0 + timedelta(hours=10), "asked for too long")
    # 60 one-minute steps: resume no later than deadline - 60 min (minus the guard's margin).
    resumed = clock.now()
    assert deadline - timedelta(hours=1, minutes=10) < resumed <= deadline - timedelta(hours=1)
    assert engine.deadline.engaged
    idle_j = (resumed - T0).total_seconds() * 50.0
    assert engine.ledger.energy_j == pytest.approx(idle_j)
    assert engine.ledger.avoided_g == pytest.approx(-idle_j / 3.6e6 * 300)
    engine.close()


@pytest.mark.timeout(20)
def test_replan_never_extends_past_the_guard() -> None:
    clock = ReplayClock(T0, speedup=SPEEDUP)
    signals = TraceSignals(hourly(T0, varying(500, 24)), clock)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=120, step_time_s=60),
                    deadline=DeadlineGuard(T0 + timedelta(hours=4), simulated=True),
                    decide_interval_s=600,
                    countdown=False)
    decision = engine.begin()
    assert decision.action == Action.RUN  # nothing clean ahead: run
    engine.wait_until(T0 + timedelta(hours=20), "test")
    # The guard's latest safe resume is 02:00; 15 trace minutes are 25 ms real at this speed-up, room for a
    # loaded machine's wake-up latency (1 minute, 1.7 ms, failed under load), still far from the 20 h asked.
    assert clock.now() <= T0 + timedelta(hours=2, minutes=15)
    engine.close()


class _Terminal:
    """A stderr that says it is a terminal, so the rich countdown renders into it."""

    def __init__(self) -> None:
        import io

        self.buffer = io.StringIO()

    def write(self, text: str) -> int:
        return self.buffer.write(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("not a real terminal")


@pytest.mark.timeout(20)
def test_delayed_start_shows_a_countdown_with_the_planned_window(monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    import rich.progress  # noqa: F401  (imported up front: the replayed clock runs during imports)

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "200")
    clock = ReplayClock(T0, speedup=SPEEDUP / 4)
    signals = TraceSignals(hourly(T0, [500, 500, 100, 100, 100]), clock)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=10, step_time_s=60),
                    deadline=DeadlineGuard(T0 + timedelta(hours=4), simulated=True),
                    countdown=True)
    decision = engine.begin()
    engine.wait_until(decision.until, "cleaner from 02:00")
    engine.close()
    shown = terminal.buffer.getvalue()
    assert re.search(r"waiting: run from 2022-06-01 0[23]:\d\d UTC to finish by 2022-06-01 04:00 UTC", shown)
    assert "cleaner from 02:00" in shown and re.search(r"\dh\d\dm\d\ds left", shown)


@pytest.mark.timeout(20)
def test_a_wait_leaves_no_scheduler_thread_even_if_the_engine_is_never_closed() -> None:
    """Forked ranks inherit every thread's locks: a leaked APScheduler thread once hung a gloo test."""
    clock = ReplayClock(T0, speedup=3600.0)
    signals = TraceSignals(hourly(T0, varying(500, 24)), clock)
    engine = Engine(WindowPolicy(T0, T0 + timedelta(days=30)),
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=10, step_time_s=1),
                    countdown=False)
    before = set(threading.enumerate())
    threading.Timer(0.2, engine.interrupt).start()
    engine.wait_until(T0 + timedelta(days=30), "long pause")
    leaked = [t.name for t in threading.enumerate() if t not in before and t.is_alive() and "APScheduler" in t.name]
    assert leaked == []


class SlowScheduler:
    """Stands in for the BackgroundScheduler: add_job takes a while; records the order of calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.adding = threading.Event()

    def start(self) -> None:
        self.calls.append("start")

    def add_job(self, func, trigger, **kwargs) -> None:
        self.calls.append("add_job start")
        self.adding.set()
        threading.Event().wait(0.2)
        self.calls.append("add_job end")

    def shutdown(self, wait: bool = True) -> None:
        self.calls.append("shutdown")


@pytest.mark.timeout(20)
def test_the_scheduler_never_shuts_down_while_a_job_adds_a_job() -> None:
    """A re-plan job calling add_job while wait() shuts the scheduler down deadlocks APScheduler
    (seen under load: shutdown joins the job's thread while holding the executors lock). The
    shutdown must wait for an add_job in progress, and a later re-plan must find no scheduler."""
    clock = ReplayClock(T0, speedup=3600.0)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=TraceSignals(hourly(T0, varying(500, 24)), clock)),
                    progress=Progress(steps_total=10, step_time_s=1),
                    countdown=False)
    scheduler = SlowScheduler()
    waiter = Waiter(engine, countdown=False, scheduler_factory=lambda: scheduler)
    waiter.open_scheduler()  # what wait() does when it begins
    scheduler.calls.clear()
    scheduler.adding.clear()
    replan = threading.Thread(target=waiter.retarget, args=(T0 + timedelta(hours=2),))  # what a re-plan does
    replan.start()
    assert scheduler.adding.wait(5)
    waiter.close_scheduler(wait=True)  # what wait() does when it ends
    replan.join(5)
    assert scheduler.calls == ["add_job start", "add_job end", "shutdown"]
    waiter.retarget(T0 + timedelta(hours=3))  # a re-plan finishing after the shutdown
    assert scheduler.calls == ["add_job start", "add_job end", "shutdown"]
    engine.close()
