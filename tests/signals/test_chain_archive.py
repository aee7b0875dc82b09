"""The signal chain records what it fetches into the forecast archive (on by default) and blends a provider's
forecast with greentrain's own by the skill the archive measured; a Session records through it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from greentrain.clock import FrozenClock
from greentrain.signals.archive.store import ForecastArchive
from greentrain.signals.base import CarbonIntensityProvider, IntensityPoint, Kind
from greentrain.signals.chain import SignalChain
from greentrain.signals.trace import load_trace

pytestmark = pytest.mark.timeout(120)

HOUR = timedelta(hours=1)


class ForecastingProvider(CarbonIntensityProvider):
    """A provider double with forecasts of its own: a real trace's future × log-normal noise of ``spread``."""

    uses_network = False  # answered in-process, so the chain is read directly (deterministic)

    def __init__(self, points: list[IntensityPoint], clock: FrozenClock, *, spread: float, seed: int = 0) -> None:
        self.name = "fc"  # type: ignore[misc]
        self._points = [replace(p, provider="fc") for p in points]
        self._clock = clock
        self._spread = spread
        self._rng = np.random.default_rng(seed)
        self.forecasts = 0

    def _index(self) -> int:
        now = self._clock.now()
        return next(i for i, p in enumerate(self._points) if p.start <= now < p.end)

    def latest(self, zone: str) -> IntensityPoint:
        return self._points[self._index()]

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        self.forecasts += 1
        i = self._index()
        ahead = self._points[i + 1: i + 1 + int(horizon_h)]
        noise = np.exp(self._spread * self._rng.standard_normal(len(ahead)))
        return [replace(p, kind=Kind.FORECAST, intensity_g_per_kwh=p.intensity_g_per_kwh * float(f))
                for p, f in zip(ahead, noise)]

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        now = self._clock.now()
        return [p for p in self._points if p.end > start and p.start < end and p.end <= now]


@pytest.fixture(scope="module")
def trace(carbon_trace) -> list[IntensityPoint]:
    return load_trace(carbon_trace("DE-LU_2022_hourly.csv"))[24 * 60: 24 * 100]


def test_a_chain_records_forecasts_own_forecasts_and_actuals(trace, tmp_path: Path) -> None:
    clock = FrozenClock(trace[24 * 20].start + timedelta(minutes=10))
    path = tmp_path / "archive.sqlite"
    chain = SignalChain([ForecastingProvider(trace, clock, spread=0.05)], zone="DE", clock=clock, archive=path)
    chain.latest()
    assert len(chain.forecast(24)) == 24
    first = int(clock.now().timestamp())
    chain.forecast(24)  # served from the cache: the same issue, not written again
    clock.advance(20 * 60)
    chain.forecast(24)  # past the cache's 5 minutes: a new fetch, a new issue; but no second own forecast this hour
    chain.close()
    with ForecastArchive(path, create=False) as archive:
        series = {s.provider: s for s in archive.series()}
        assert set(series) == {"fc", "greentrain"}
        assert series["fc"].forecast_rows == 2 * 24 and series["greentrain"].forecast_rows == 24
        assert series["fc"].actual_rows >= 24 * 19  # the history behind the own forecast
        issued, target, _ = archive.forecast_rows("fc", "DE")
        assert sorted(set(issued.tolist())) == [first, first + 20 * 60]
        assert (target > issued).all()


def test_no_recording_when_off_or_when_no_provider_issues_forecasts(trace, tmp_path: Path, monkeypatch) -> None:
    clock = FrozenClock(trace[24 * 20].start)
    monkeypatch.setenv("GREENTRAIN_FORECAST_ARCHIVE", "off")
    chain = SignalChain([ForecastingProvider(trace, clock, spread=0.05)], zone="DE", clock=clock)
    chain.forecast(12)
    chain.close()
    monkeypatch.setenv("GREENTRAIN_FORECAST_ARCHIVE", str(tmp_path / "default.sqlite"))
    from greentrain.signals import make_provider
    from tests.conftest import find_trace

    csv = make_provider(f"csv:{find_trace('DE-LU_2022_hourly.csv')}", clock=clock)
    chain = SignalChain([csv], zone="DE", clock=clock)
    chain.forecast(12)  # greentrain's forecaster over a trace: nothing of a provider's to keep
    chain.close()
    assert list(tmp_path.iterdir()) == []


def _run_hourly(trace, tmp_path: Path, spread: float, hours: int) -> tuple[list[IntensityPoint], Path]:
    clock = FrozenClock(trace[24 * 20].start)
    path = tmp_path / f"spread-{spread}.sqlite"
    chain = SignalChain([ForecastingProvider(trace, clock, spread=spread, seed=3)], zone="DE", clock=clock,
                        archive=path)
    for _ in range(hours):
        chain.latest()
        chain.forecast(48)
        clock.advance(3600)
    latest = chain.forecast(48)
    chain.close()
    return latest, path


def test_the_live_chain_blends_by_the_skill_it_recorded(trace, tmp_path: Path) -> None:
    good, _ = _run_hourly(trace, tmp_path, spread=0.01, hours=24 * 3)
    bad, path = _run_hourly(trace, tmp_path, spread=1.5, hours=24 * 3)
    actual = {p.start: p.intensity_g_per_kwh for p in trace}
    # A provider that is right keeps (nearly) all the weight: the blend stays within its 1 % noise and a bit.
    assert all(abs(p.intensity_g_per_kwh / actual[p.start] - 1) < 0.06 for p in good)
    assert "fc+greentrain" in {p.provider for p in bad[24:]}  # a wild one is weighed down far ahead
    assert all(b.start == g.start for b, g in zip(bad, good)) and len(bad) == len(good) == 48
    with ForecastArchive(path, create=False) as archive:
        assert {s.provider: s.forecast_rows > 0 for s in archive.series()} == {"fc": True, "greentrain": True}


def test_a_session_records_the_forecasts_it_fetched(trace, tmp_path: Path, monkeypatch) -> None:
    from greentrain.session import Session

    path = tmp_path / "session.sqlite"
    monkeypatch.setenv("GREENTRAIN_FORECAST_ARCHIVE", str(path))
    clock = FrozenClock(trace[24 * 20].start)
    provider = ForecastingProvider(trace, clock, spread=0.05)
    with Session("carbon-aware", provider=provider, zone="DE", steps_total=6, clock=clock, devices=False,
                 progress=False, relaunch="none", decide_interval_s=60, step_time_s=60.0,
                 deadline=clock.now() + timedelta(hours=30)) as session:
        for _ in range(session.start_step, 6):
            clock.advance(60)
            session.step()
            if session.should_stop:
                break
    assert provider.forecasts >= 1
    with ForecastArchive(path, create=False) as archive:
        assert {s.provider for s in archive.series() if s.forecast_rows} == {"fc", "greentrain"}


def test_session_and_run_chains_record_by_default(tmp_path: Path, monkeypatch) -> None:
    """``Session`` and ``greentrain run`` build their signal through ``build_signals``: recording is armed there
    for a provider with forecasts of its own, in the default archive; a trace records nothing."""
    from greentrain.job.resources import build_signals
    from tests.conftest import find_trace

    monkeypatch.setenv("GREENTRAIN_FORECAST_ARCHIVE", str(tmp_path / "default.sqlite"))
    clock = FrozenClock(datetime(2022, 3, 1, tzinfo=UTC))
    for spec, recording in (("ukgrid", True), ("electricitymaps", True),
                            (f"csv:{find_trace('DE-LU_2022_hourly.csv')}", False)):
        chain = build_signals("GB" if recording else None, spec, clock)
        assert (chain.archive is not None) == recording, spec
        if recording:
            assert chain.archive.recorder.path == tmp_path / "default.sqlite"
        chain.close()


def test_a_bad_archive_never_costs_a_forecast(trace, tmp_path: Path, caplog) -> None:
    clock = FrozenClock(trace[24 * 20].start)
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\x13" * 4096)
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the archive's folder should be", encoding="utf-8")
    for path in (corrupt, blocked / "forecasts.sqlite"):
        chain = SignalChain([ForecastingProvider(trace, clock, spread=0.05)], zone="DE", clock=clock, archive=path)
        for _ in range(4):
            assert len(chain.forecast(24)) == 24  # served whatever the archive does
            clock.advance(3600)
        chain.close()
    assert [p.name.startswith("corrupt.sqlite.corrupt-") for p in tmp_path.iterdir()].count(True) == 1
    warnings = [r.getMessage() for r in caplog.records if "forecast archive" in r.getMessage()]
    assert any("set aside" in w for w in warnings)
    assert any("unusable" in w and "recording stopped for this process" in w for w in warnings)
