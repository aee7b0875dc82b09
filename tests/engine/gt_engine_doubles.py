"""Test doubles shared by tests/engine and tests/session (real interfaces, recorded data).

``TraceSignals`` is a SignalChain-shaped view over real hourly points (loaded
from the shared Electricity Maps CSV with ``load_trace``), shifted so the
trace plays on the test's clock. Policies are tiny real ``Policy`` subclasses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import NamedTuple

from greentrain.clock import Clock, FrozenClock
from greentrain.engine import Engine
from greentrain.errors import SignalError
from greentrain.monitor.readings import StepEnergy
from greentrain.policies.base import Action, Decision, Policy, Snapshot
from greentrain.provenance import Source
from greentrain.signals.base import CarbonIntensityProvider, IntensityPoint, Kind, ProviderStatus


def hourly(start: datetime, values: list[float], zone: str = "GB") -> list[IntensityPoint]:
    """Hourly actual points from ``start``."""
    return [IntensityPoint(start=start + timedelta(hours=i), end=start + timedelta(hours=i + 1),
                           intensity_g_per_kwh=v, kind=Kind.ACTUAL, provider="test", zone=zone)
            for i, v in enumerate(values)]


class TraceSignals:
    """Chain-shaped signal over fixed points on ``clock``: latest = covering point, forecast = perfect."""

    def __init__(self, points: list[IntensityPoint], clock: Clock) -> None:
        self.points = list(points)
        self.clock = clock
        self.fail = False
        self.latest_calls = 0

    def latest(self) -> IntensityPoint:
        self.latest_calls += 1
        if self.fail:
            raise SignalError("test: provider down")
        now = self.clock.now()
        for p in self.points:
            if p.start <= now < p.end:
                return p
        raise SignalError("test: no point covers now")

    def forecast(self, horizon_h: float = 72.0) -> list[IntensityPoint]:
        if self.fail:
            raise SignalError("test: provider down")
        now = self.clock.now()
        end = now + timedelta(hours=horizon_h)
        return [replace(p, kind=Kind.FORECAST) for p in self.points if p.end > now and p.start < end]

    def history(self, start: datetime, end: datetime) -> list[IntensityPoint]:
        if self.fail:
            raise SignalError("test: provider down")
        now = self.clock.now()
        return [p for p in self.points if p.end > start and p.start < min(end, now)]

    def status(self) -> ProviderStatus:
        return ProviderStatus(provider="test", zone="GB", age_s=0.0, stale=self.fail)


class ThresholdPolicy(Policy):
    """Pause while intensity > threshold, until the next forecast point at or below it."""

    name = "test-threshold"

    def __init__(self, threshold_g_per_kwh: float) -> None:
        self.threshold = threshold_g_per_kwh
        self.snapshots: list[Snapshot] = []

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        self.snapshots.append(snapshot)
        now_point = snapshot.carbon_now
        if now_point is None or now_point.intensity_g_per_kwh <= self.threshold:
            return Decision(action=Action.RUN, reason="clean", until=now_point.end if now_point else None)
        for p in snapshot.forecast:
            if p.start > now and p.intensity_g_per_kwh <= self.threshold:
                return Decision(action=Action.PAUSE, until=p.start, reason="dirty hour")
        return Decision(action=Action.RUN, reason="no cleaner hour ahead")


class WindowPolicy(Policy):
    """Pauses during [pause_from, pause_to) whatever the work left: a plan the engine must guard."""

    name = "test-window"

    def __init__(self, pause_from: datetime, pause_to: datetime) -> None:
        self.pause_from = pause_from
        self.pause_to = pause_to

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        if self.pause_from <= now < self.pause_to:
            return Decision(action=Action.PAUSE, until=self.pause_to, reason="planned pause")
        return Decision(action=Action.RUN, until=self.pause_from if now < self.pause_from else None)


class RunNowPolicy(Policy):
    name = "test-run-now"

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        return Decision(action=Action.RUN)


class BrokenPolicy(Policy):
    name = "test-broken"

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        raise ZeroDivisionError("bug in policy")


class PointProvider(CarbonIntensityProvider):
    """A CarbonIntensityProvider over fixed points (for code that wraps providers itself)."""

    name = "test-points"

    def __init__(self, signals: TraceSignals) -> None:
        self.signals = signals

    def latest(self, zone: str) -> IntensityPoint:
        return self.signals.latest()

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        return self.signals.forecast(horizon_h)

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        return [p for p in self.signals.points if p.end > start and p.start < end]


class ClockMonitor:
    """Monitor-shaped double: a constant whole-job draw integrated over the test clock (exact energy)."""

    def __init__(self, clock: Clock, power_w: float = 250.0, idle_w: float = 0.0) -> None:
        self.clock = clock
        self.power = power_w
        self.idle_w = idle_w
        self._energy_j = 0.0
        self._last = clock.now()
        self._busy = False
        self._step_at: datetime | None = None
        self._steps = 0
        self.fail = False

    def _integrate(self) -> None:
        now = self.clock.now()
        self._energy_j += (now - self._last).total_seconds() * (self.power if self._busy else self.idle_w)
        self._last = now

    def total_energy_j(self) -> float:
        self._integrate()
        return self._energy_j

    def power_w(self) -> float:
        return self.power

    def step_begin(self) -> None:
        self._integrate()
        self._busy = True
        self._step_at = self.clock.now()

    def step_end(self) -> StepEnergy:
        if self.fail:
            raise RuntimeError("test: device lost")
        self._integrate()
        self._busy = False
        self._steps += 1
        duration_s = (self.clock.now() - (self._step_at or self.clock.now())).total_seconds()
        return StepEnergy(step=self._steps, duration_s=duration_s, energy_j=duration_s * self.power,
                          source=Source.INTEGRATED)  # a constant draw integrated exactly


class Wait(NamedTuple):
    """One wait of a driven job: after how many steps, when it began and ended (job clock), and why."""

    step: int
    began: datetime
    ended: datetime
    decision: Decision


def drive(engine: Engine, clock: FrozenClock, *, step_s: float | Callable[[int], float] = 60.0, tokens: int = 1,
          on_pause: Callable[[], None] = lambda: None) -> list[Wait]:
    """Run a job the way every driver does: ``begin`` (a delayed start is waited out), then steps of ``step_s``
    job-clock seconds (or ``step_s(steps_done)``) until the job is finished or a budget stops it (a STOP is
    the last entry, with no wait). Each pause is waited out, ``on_pause`` first; the waits are returned."""
    waits: list[Wait] = []

    def wait(decision: Decision) -> None:
        began = clock.now()
        engine.wait_until(decision.until, decision.reason)
        waits.append(Wait(engine.progress.steps_done, began, clock.now(), decision))

    decision = engine.begin()
    if decision.action != Action.RUN:
        wait(decision)
    while not engine.finished:
        engine.step_begin()
        clock.advance(step_s(engine.progress.steps_done) if callable(step_s) else step_s)
        decision = engine.step_end(tokens=tokens)
        if decision.action == Action.STOP:
            waits.append(Wait(engine.progress.steps_done, clock.now(), clock.now(), decision))
            break
        if decision.action != Action.RUN and not engine.finished:
            on_pause()
            wait(decision)
    return waits


def varying(value: float, count: int) -> list[float]:
    """``count`` hourly values around ``value`` that are not all equal: a signal that says something about
    time (a constant one never lets the engine wait, ``policies/worth.py``) without changing what a
    threshold policy decides."""
    return [value + 0.5 * (i % 2) for i in range(count)]
