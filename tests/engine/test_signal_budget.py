"""A networked carbon signal is read off the training thread: one step boundary waits at most one budget."""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ThresholdPolicy, TraceSignals, hourly  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, Progress
from greentrain.engine import Engine
from greentrain.engine.background import BackgroundFetch

T0 = datetime(2026, 11, 23, 0, tzinfo=UTC)


class HeldSignals(TraceSignals):
    """A trace behind a network: every call waits until ``release`` is set; says it uses the network."""

    uses_network = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.lock = threading.Lock()  # a SignalChain serialises its calls the same way

    def latest(self):
        with self.lock:
            self.release.wait(30)
            return super().latest()

    def forecast(self, horizon_h: float = 72.0):
        with self.lock:
            self.release.wait(30)
            return super().forecast(horizon_h)


class SpyFetch(BackgroundFetch):
    def __init__(self) -> None:
        super().__init__()
        self.budgets: list[float] = []

    def poll(self, key, fn=None, budget_s=0.0):
        self.budgets.append(budget_s)
        return super().poll(key, fn, budget_s)


def test_one_boundary_waits_one_budget_and_the_answer_arrives_later() -> None:
    clock = FrozenClock(T0 + timedelta(minutes=5))
    signals = HeldSignals(hourly(T0, [100.0] * 48), clock)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=100, step_time_s=1.0),
                    countdown=False)
    view = engine.signals
    spy = view.fetcher = SpyFetch()
    view.fetch_budget_s = 0.05
    engine.begin()  # the fetch is held: begin returns without a value
    assert not signals.release.is_set()
    assert sum(spy.budgets) <= view.fetch_budget_s  # the second fetch did not wait a second budget
    assert view.stale and view.last is None and spy.started == 1  # runs now, marked stale
    for _ in range(5):  # while held: each boundary returns at once (the fetch in flight is not re-waited)
        spy.budgets.clear()
        engine.step_begin()
        engine.step_end(tokens=1)
        assert sum(spy.budgets) <= view.fetch_budget_s and spy.started == 1
    signals.release.set()
    for _ in range(500):  # bounded: the answers are collected at a later boundary
        spy.budgets.clear()
        engine.step_begin()
        clock.advance(3600)  # past the refresh interval: each boundary asks again
        engine.step_end(tokens=1)
        # latest and forecast share one budget: the second is offered only what the first left
        assert max(spy.budgets) <= view.fetch_budget_s and spy.budgets == sorted(spy.budgets, reverse=True)
        assert len(spy.budgets) < 2 or spy.budgets[1] < spy.budgets[0]
        if view.last is not None and view.known_points()[1:]:
            break
        threading.Event().wait(0.01)
    assert view.last is not None and view.last.intensity_g_per_kwh == 100.0 and not view.stale
    assert view.known_points()[1:], "the forecast arrived too"
    engine.close()
