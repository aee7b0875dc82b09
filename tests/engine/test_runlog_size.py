"""Run logs of at most 1 KB per step (issue 38, build 9): forecasts and carbon values are logged when they
change, not at every read, and the log still reads as before (``greentrain report``)."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ThresholdPolicy, TraceSignals, drive, hourly  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, DeadlineGuard, Engine, Progress
from greentrain.engine.signallog import SignalLog, forecast_fields
from greentrain.events import EventLog, forecast_points, read_events
from greentrain.report.model import load_run
from greentrain.signals.base import IntensityPoint, Kind

T0 = datetime(2022, 6, 1, 0, tzinfo=UTC)
pytestmark = pytest.mark.timeout(60)


class ReissuedForecast(TraceSignals):
    """A forecast re-issued every hour with every value changed (a forecaster's errors move with its issue
    time), over a trace with a dirty morning."""

    def forecast(self, horizon_h: float = 72.0) -> list[IntensityPoint]:
        issued = self.clock.now().replace(minute=0, second=0, microsecond=0)
        wobble = 1.0 + 0.05 * math.sin(issued.timestamp() / 3600.0)
        return [replace(p, intensity_g_per_kwh=p.intensity_g_per_kwh * wobble)
                for p in super().forecast(horizon_h)]


def test_a_100_step_run_with_a_changing_forecast_logs_at_most_1_kb_per_step(tmp_path: Path) -> None:
    """Steps of 15 min: every step reads the forecast (``forecast_refresh_s``); logging each read was 3.4 KB
    a step. The forecast changes every hour; the log keeps those changes."""
    clock = FrozenClock(T0)
    values = [150.0 + (i % 3) for i in range(2)] + [400.0 + (i % 2) for i in range(4)] + \
             [120.0 + (i % 5) for i in range(120)]
    signals = ReissuedForecast(hourly(T0, values), clock)
    log_path = tmp_path / "run.jsonl"
    engine = Engine(ThresholdPolicy(300),
                    Collaborators(clock=clock, signals=signals, event_log=EventLog(log_path)),
                    progress=Progress(steps_total=100, step_time_s=900.0),
                    deadline=DeadlineGuard(T0 + timedelta(hours=40), simulated=True),
                    decide_interval_s=900.0, countdown=False)
    waits = drive(engine, clock, step_s=900.0)
    engine.close()
    assert waits, "the dirty hours were waited out"
    events = read_events(log_path)
    forecasts = [e for e in events if e["event"] == "forecast"]
    assert len(forecasts) >= 20, "each re-issued forecast is logged"
    bytes_per_step = log_path.stat().st_size / 100
    assert bytes_per_step <= 1024, f"{bytes_per_step:.0f} B per step"
    run = load_run(log_path)  # the report reads it as before: the first forecast whole, steps, carbon values
    assert len(run.steps) == 100 and run.forecast and run.intensity
    assert len(run.forecast) == forecasts[0]["count"]


def _point(hour: int, value: float) -> IntensityPoint:
    start = T0 + timedelta(hours=hour)
    return IntensityPoint(start=start, end=start + timedelta(hours=1), intensity_g_per_kwh=value,
                          kind=Kind.FORECAST, provider="test", zone="GB")


def test_forecast_events_carry_only_new_or_changed_points() -> None:
    written: list[dict] = []
    log = SignalLog(lambda event, **fields: written.append({"event": event, **fields}))
    first = [_point(h, 100.0 + h) for h in range(4)]
    assert log.forecast(first) == 4
    assert log.forecast(first) == 0, "the same forecast read again: no event"
    assert log.forecast([_point(h, 100.0 + h + 0.01) for h in range(4)]) == 0, "below the logged precision"
    assert log.forecast(first[1:] + [_point(4, 90.0)]) == 1, "the window slid: the new hour only"
    assert log.forecast([_point(1, 80.0)] + first[2:] + [_point(4, 90.0)]) == 1, "one value revised"
    assert [e["values"] for e in written] == [[100.0, 101.0, 102.0, 103.0], [90.0], [80.0]]
    assert written[1]["start"] == T0 + timedelta(hours=4) and written[1]["count"] == 4
    assert written[0]["interval_s"] == 3600.0
    # Read back as [start, value] pairs (the report's form), the old form still read as it was.
    as_logged = {**written[0], "start": "2022-06-01T00:00:00Z"}
    assert forecast_points(as_logged)[1] == ["2022-06-01T01:00:00Z", 101.0]
    assert forecast_points({"points": [["2022-06-01T00:00:00Z", 5.0]]}) == [["2022-06-01T00:00:00Z", 5.0]]
    uneven = [_point(0, 1.0), _point(1, 2.0), _point(3, 3.0)]
    assert "points" in forecast_fields(uneven) and len(forecast_fields(uneven)["points"]) == 3


def test_carbon_events_are_written_when_the_value_changes() -> None:
    written: list[str] = []
    log = SignalLog(lambda event, **fields: written.append(event))
    now = _point(0, 200.0)
    assert log.carbon(now) and not log.carbon(now)
    assert log.carbon(_point(1, 200.0)), "a new interval"
    assert written == ["carbon", "carbon"]
