"""SignalChain: fallback down the chain, backoff, recovery, staleness, cache, peek."""

from __future__ import annotations

import random
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from greentrain.clock import FrozenClock
from greentrain.errors import RateLimitedError, SignalError
from greentrain.signals import SignalChain, make_provider
from greentrain.signals.base import CarbonIntensityProvider, IntensityPoint, Kind
from greentrain.signals.trace import load_trace

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2022, 3, 1, 12, 30, tzinfo=UTC)


class TraceBackedProvider(CarbonIntensityProvider):
    """A live-provider double answering from a real trace at the clock's time; can be made to fail."""

    def __init__(self, name: str, points: list[IntensityPoint], clock: FrozenClock, *, has_forecast: bool = True):
        self.name = name  # type: ignore[misc]
        self._points = [replace(p, provider=name) for p in points]
        self._clock = clock
        self.has_forecast = has_forecast
        self.error: Exception | None = None
        self.calls = 0
        self.gate: threading.Event | None = None  # blocks latest() like a hung API

    def _check(self) -> None:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(10)
        if self.error is not None:
            raise self.error

    def _index(self) -> int:
        now = self._clock.now()
        return next(i for i, p in enumerate(self._points) if p.start <= now < p.end)

    def latest(self, zone: str) -> IntensityPoint:
        self._check()
        return self._points[self._index()]

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        self._check()
        if not self.has_forecast:
            return []
        i = self._index()
        return [
            IntensityPoint(start=p.start, end=p.end, intensity_g_per_kwh=p.intensity_g_per_kwh, kind=Kind.FORECAST,
                           provider=self.name, zone=p.zone)
            for p in self._points[i + 1 : i + 1 + int(horizon_h)]
        ]

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        self._check()
        now = self._clock.now()
        return [p for p in self._points if p.end > start and p.start < min(end, now)]


@pytest.fixture(scope="module")
def gb_points(carbon_trace):
    return load_trace(carbon_trace("GB_2022_hourly.csv"))


@pytest.fixture
def clock():
    return FrozenClock(T0)


def _chain(providers, clock, **kw):
    kw.setdefault("rng", random.Random(0))
    return SignalChain(providers, zone="GB", clock=clock, **kw)


def test_first_provider_answers_and_is_reported(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    chain = _chain([live, make_provider("static", clock=clock)], clock)
    point = chain.latest()
    assert point.provider == "live" and point.intensity_g_per_kwh == 182.58  # GB 2022-03-01 12:00 direct
    status = chain.status()
    assert (status.provider, status.stale, status.last_error) == ("live", False, None)


def test_falls_back_then_recovers_after_backoff(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    live.error = SignalError("live /latest: HTTP 503")
    chain = _chain([live, make_provider("static", clock=clock)], clock, ttl_s=60, backoff_base_s=120)
    point = chain.latest()
    assert point.provider == "static" and point.kind == Kind.STATIC
    status = chain.status()
    assert status.provider == "static" and "HTTP 503" in status.last_error
    # Inside the backoff window the failing provider is not asked again.
    clock.advance(30)
    calls = live.calls
    chain.latest()
    assert live.calls == calls
    # After the backoff (<= base) the provider is retried and, once healthy, used again.
    live.error = None
    clock.advance(200)
    point = chain.latest()
    assert point.provider == "live"
    assert chain.status().provider == "live"


def test_every_provider_failing_serves_last_good_marked_stale(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    chain = _chain([live], clock, ttl_s=10, stale_after_s=1800)
    good = chain.latest()
    live.error = SignalError("live: timed out")
    clock.advance(120)
    again = chain.latest()  # never raises while some value exists
    assert again == good
    status = chain.status()
    assert status.stale and status.age_s >= 120 and "timed out" in status.last_error


def test_no_value_ever_raises_signal_error(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    live.error = SignalError("live: cannot connect")
    chain = _chain([live], clock)
    with pytest.raises(SignalError, match="no carbon signal"):
        chain.latest()
    status = chain.status()
    assert status.stale and status.age_s == float("inf")


def test_unexpected_provider_exception_becomes_fallback(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    live.error = KeyError("carbonIntensity")  # a provider bug must not reach training
    chain = _chain([live, make_provider("static", clock=clock)], clock)
    assert chain.latest().provider == "static"


def test_retry_after_is_respected(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    live.error = RateLimitedError("live: HTTP 429", retry_after_s=900)
    chain = _chain([live, make_provider("static", clock=clock)], clock, ttl_s=1, backoff_base_s=10)
    chain.latest()
    live.error = None
    clock.advance(600)  # past the exponential backoff but not the server's Retry-After
    calls = live.calls
    assert chain.latest().provider == "static" and live.calls == calls
    clock.advance(400)
    assert chain.latest().provider == "live"


def test_cache_serves_within_ttl(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    chain = _chain([live], clock, ttl_s=300)
    chain.latest()
    chain.latest()
    clock.advance(299)
    chain.latest()
    assert live.calls == 1
    clock.advance(2)
    chain.latest()
    assert live.calls == 2


def test_disk_cache_shared_between_chains(gb_points, clock, tmp_path):
    first = TraceBackedProvider("live", gb_points, clock)
    second = TraceBackedProvider("live", gb_points, clock)
    a = _chain([first], clock, cache_dir=tmp_path)
    b = _chain([second], clock, cache_dir=tmp_path)  # another rank / a restart
    assert a.latest() == b.latest()
    assert (first.calls, second.calls) == (1, 0)


def test_forecast_uses_provider_then_forecaster(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    chain = _chain([live], clock)
    points = chain.forecast(24)
    assert len(points) == 24 and all(p.provider == "live" for p in points)
    no_fc = TraceBackedProvider("plain", gb_points, clock, has_forecast=False)
    points = _chain([no_fc], clock).forecast(72)
    assert len(points) >= 72 - 1 and all(p.kind == Kind.FORECAST for p in points)
    assert points[0].start == datetime(2022, 3, 1, 13, tzinfo=UTC)
    # Causal: nothing in the forecast equals the trace's future by construction of a copy.
    future = {p.start: p.intensity_g_per_kwh for p in gb_points}
    assert any(abs(p.intensity_g_per_kwh - future[p.start]) > 1e-6 for p in points)


def test_forecast_empty_when_nothing_known(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    live.error = SignalError("down")
    assert _chain([live], clock).forecast(24) == []


def test_peek_never_blocks_on_a_hung_fetch(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    chain = _chain([live], clock, ttl_s=1)
    assert chain.peek() is None and chain.peek_forecast() == []
    first = chain.latest()
    chain.forecast(6)
    clock.advance(5)
    live.gate = threading.Event()  # the next fetch hangs
    worker = threading.Thread(target=chain.latest, daemon=True)
    worker.start()
    try:
        assert chain.peek() == first  # answered at once from memory
        assert len(chain.peek_forecast()) == 6
    finally:
        live.gate.set()
        worker.join(10)
    clock.advance(3 * 3600)
    assert len(chain.peek_forecast()) == 4  # 13:00-15:00 ended by 15:30; 15:00-19:00 remain


def test_status_never_contains_secrets(gb_points, clock, monkeypatch):
    token = "sk-very-secret-token-123"
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", token)
    em = make_provider("electricitymaps", clock=clock, api_base="http://127.0.0.1:9")  # nothing listens there
    chain = _chain([em, make_provider("static", clock=clock)], clock)
    assert chain.latest().provider == "static"
    status = chain.status()
    assert status.last_error and token not in repr(status)


def test_chain_needs_a_provider(clock):
    with pytest.raises(SignalError):
        SignalChain([], zone="GB", clock=clock)


def test_status_age_grows_with_the_value(gb_points, clock):
    live = TraceBackedProvider("live", gb_points, clock)
    chain = _chain([live], clock, ttl_s=10_000, stale_after_s=3600)
    chain.latest()
    clock.advance(timedelta(minutes=20).total_seconds())
    status = chain.status()
    assert 1199 <= status.age_s <= 1201 and not status.stale
    clock.advance(3 * 3600)
    assert chain.status().stale


class NoForecastPlan(TraceBackedProvider):
    """A live provider whose plan lacks the forecast endpoint (HTTP 403 there, fine elsewhere)."""

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        from greentrain.errors import AuthError

        raise AuthError(f"{self.name} forecast: HTTP 403, not authorised")


def test_forecast_endpoint_refused_keeps_latest_and_uses_history(gb_points, clock):
    live = NoForecastPlan("live", gb_points, clock)
    chain = _chain([live, make_provider("static", clock=clock)], clock, ttl_s=1)
    points = chain.forecast(48)
    assert len(points) == 48 and points[0].start == datetime(2022, 3, 1, 13, tzinfo=UTC)
    assert all(p.kind == Kind.FORECAST for p in points)  # the Forecaster on the provider's history
    clock.advance(5)
    assert chain.latest().provider == "live"  # the 403 on /forecast did not back off /latest
