"""Ctrl-C during a wait (``engine/waiter.py``) under Python's own SIGINT handler, as in a plain ``Session``
loop: one line (the Session's), exit 130, no traceback; a loop's own
``except KeyboardInterrupt`` still sees the wait's ``Interrupted``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.gt_interrupt import interrupt_after

pytestmark = pytest.mark.timeout(60)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_run_outcomes import write_dirty_then_clean_trace  # noqa: E402

LOOP = textwrap.dedent(
    """
    import time
    from datetime import UTC, datetime
    from greentrain.clock import ReplayClock
    from greentrain.session import Session
    clock = ReplayClock(datetime(2022, 3, 10, 0, 30, tzinfo=UTC), speedup=360.0)  # dirty until 06:00: a long wait
    with Session("carbon-aware", clock=clock, devices=False, provider="csv:trace.csv", zone="TL",
                 deadline="+20", steps_total=20, step_time_s=180.0, relaunch="none", progress=False) as session:
        for step in range(session.step_index, 20):
            time.sleep(0.01)
            session.step()
    print("trained")
    """
)


def _interrupt_the_wait(tmp_path: Path) -> tuple[int, str, str]:
    write_dirty_then_clean_trace(tmp_path / "trace.csv")
    (tmp_path / "loop.py").write_text(LOOP)
    proc = subprocess.Popen([sys.executable, "loop.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    out, err = interrupt_after(proc, "delaying start")
    return proc.returncode, out, err


def test_ctrl_c_during_a_session_wait_is_one_line_and_130(tmp_path: Path) -> None:
    status, out, err = _interrupt_the_wait(tmp_path)
    assert status == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    said = [line for line in err.splitlines() if "interrupted" in line]
    assert len(said) == 1 and said[0].startswith("greentrain: interrupted"), err
    assert "trained" not in out
    assert " met" not in err and "avoided" not in err


def test_the_wait_ends_cleanly_and_raises_interrupted(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from gt_engine_doubles import ThresholdPolicy, TraceSignals, hourly

    from greentrain.clock import ReplayClock
    from greentrain.engine import Collaborators, DeadlineGuard, Engine, Progress
    from greentrain.errors import Interrupted
    from greentrain.events import EventLog, read_events

    t0 = datetime(2022, 5, 1, tzinfo=UTC)
    clock = ReplayClock(t0, speedup=60.0)
    log = EventLog(tmp_path / "run.jsonl")
    engine = Engine(ThresholdPolicy(200), Collaborators(clock=clock, signals=TraceSignals(hourly(t0, [900, 100]), clock),
                                                        event_log=log),
                    progress=Progress(work_total_s=600, step_time_s=60), decide_interval_s=60, countdown=False,
                    deadline=DeadlineGuard(t0 + timedelta(hours=4), simulated=True))

    def ctrl_c(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    clock.sleep = ctrl_c  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt) as caught:  # a loop's own except KeyboardInterrupt still sees it
        engine.wait_until(t0 + timedelta(hours=1), "dirty")
    assert isinstance(caught.value, Interrupted) and isinstance(caught.value, SystemExit)
    assert caught.value.code == 130
    assert engine.waiter._scheduler is None, "the wait's scheduler thread is gone"
    engine.close()
    log.close()
    assert any(e["event"] == "interrupted" for e in read_events(tmp_path / "run.jsonl"))


def test_an_interrupt_from_inside_the_events_own_lock_never_deadlocks() -> None:
    """A signal handler runs on the main thread between two bytecodes, maybe while that thread is inside
    ``Event.wait``/``clear`` holding the event's own lock; the handler's request must still end the wait
    (``Event.set`` there hung ``greentrain run`` forever after a Ctrl-C)."""
    import threading

    from greentrain.engine.interrupt_relay import InterruptRelay

    event = threading.Event()
    relay = InterruptRelay(event)

    def handler_while_the_lock_is_held() -> None:
        with event._cond:  # type: ignore[attr-defined]  # as inside Event.wait on the main thread
            relay.request()

    with relay:
        caller = threading.Thread(target=handler_while_the_lock_is_held, daemon=True)
        caller.start()
        caller.join(5)
        assert not caller.is_alive(), "the request waited on a lock its own thread holds"
        assert event.wait(5), "the relay set the event once the lock was free"
    relay.request()  # outside a wait: kept for no one
    with relay:
        assert not event.wait(0.2) or event.is_set()  # set before; a stale request is not replayed
        event.clear()
        assert not event.wait(0.2), "a request made before this wait does not end it"


def test_an_engine_wait_ends_when_interrupted_from_inside_the_wake_events_lock(tmp_path: Path) -> None:
    import threading
    from datetime import UTC, datetime, timedelta

    from gt_engine_doubles import ThresholdPolicy, TraceSignals, hourly

    from greentrain.clock import ReplayClock
    from greentrain.engine import Collaborators, DeadlineGuard, Engine, Progress

    t0 = datetime(2022, 5, 1, tzinfo=UTC)
    clock = ReplayClock(t0, speedup=60.0)  # the hour's wait lasts a real minute
    engine = Engine(ThresholdPolicy(200), Collaborators(clock=clock, signals=TraceSignals(hourly(t0, [900, 100]), clock)),
                    progress=Progress(work_total_s=600, step_time_s=60), decide_interval_s=60, countdown=False,
                    deadline=DeadlineGuard(t0 + timedelta(hours=4), simulated=True))
    wake = engine.waiter._wake

    def handler_while_the_lock_is_held() -> None:
        with wake._cond:  # type: ignore[attr-defined]
            engine.interrupt()

    timer = threading.Timer(0.5, handler_while_the_lock_is_held)
    timer.daemon = True
    timer.start()
    started = clock.now()
    assert engine.wait_until(t0 + timedelta(hours=1), "dirty") is True
    assert clock.now() - started < timedelta(minutes=30), "interrupted long before the planned resume"
    engine.close()
