"""CSV trace replay alignment and causality; static CodeCarbon averages; make_provider."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from greentrain.clock import FrozenClock, ReplayClock
from greentrain.errors import ConfigError, SignalError
from greentrain.signals import make_provider, provider_names
from greentrain.signals.base import EmissionFactor, Kind
from greentrain.signals.trace import load_trace

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def gb_csv(carbon_trace):
    return carbon_trace("GB_2022_hourly.csv")


@pytest.fixture(scope="module")
def gb_points(gb_csv):
    return {p.start: p for p in load_trace(gb_csv)}


def test_clock_inside_trace_year_coincides_with_trace_time(gb_csv, gb_points):
    clock = FrozenClock(datetime(2022, 6, 10, 14, 45, tzinfo=UTC))
    csv = make_provider(f"csv:{gb_csv}", clock=clock)
    point = csv.latest("GB")
    hour = datetime(2022, 6, 10, 14, tzinfo=UTC)
    assert point.start == hour and point.intensity_g_per_kwh == gb_points[hour].intensity_g_per_kwh
    assert (point.kind, point.provider, point.zone) == (Kind.ACTUAL, "csv", "GB")


def test_other_year_maps_to_same_month_day_hour_in_clock_time(gb_csv, gb_points):
    clock = FrozenClock(datetime(2026, 6, 10, 14, 45, tzinfo=UTC))
    csv = make_provider(f"csv:{gb_csv}", clock=clock)
    point = csv.latest("GB")
    hour = datetime(2022, 6, 10, 14, tzinfo=UTC)
    assert point.intensity_g_per_kwh == gb_points[hour].intensity_g_per_kwh
    assert point.start == datetime(2026, 6, 10, 14, tzinfo=UTC)  # moved into the clock's year
    history = csv.history("GB", clock.now() - timedelta(hours=3), clock.now())
    assert [p.start.hour for p in history] == [11, 12, 13, 14] and history[-1] == point
    # A chain on the wall clock sees a fresh value and a forecast that starts after now.
    from greentrain.signals import SignalChain

    chain = SignalChain([csv], zone="GB", clock=clock)
    assert chain.latest() == point and not chain.status().stale
    forecast = chain.forecast(24)
    assert len(forecast) == 24 and forecast[0].start == datetime(2026, 6, 10, 15, tzinfo=UTC)


def test_replay_start_plays_from_there_and_maps_back_to_clock_time(gb_csv, gb_points):
    clock = FrozenClock(datetime(2030, 1, 1, tzinfo=UTC))
    start = datetime(2022, 9, 1, 6, tzinfo=UTC)
    csv = make_provider(f"csv:{gb_csv}", clock=clock, replay_start=start.isoformat(), speedup=60)
    clock.advance(90)  # 90 clock seconds x 60 = 1.5 trace hours
    point = csv.latest("GB")
    assert point.intensity_g_per_kwh == gb_points[start + timedelta(hours=1)].intensity_g_per_kwh
    assert point.start == datetime(2030, 1, 1, 0, 1, tzinfo=UTC)  # trace hour 1 = clock minute 1
    assert point.end - point.start == timedelta(minutes=1)


def test_replay_clock_easy_path(gb_csv, gb_points):
    origin = datetime(2022, 3, 1, tzinfo=UTC)
    clock = ReplayClock(origin, speedup=60.0)  # a trace hour per real minute: loading the file cannot cross it
    csv = make_provider(f"csv:{gb_csv}", clock=clock, replay_start=clock.now())
    point = csv.latest("GB")
    assert point.start == origin and point.intensity_g_per_kwh == gb_points[origin].intensity_g_per_kwh
    assert point.end == origin + timedelta(hours=1)  # anchored on the clock: intervals stay on the hour


def test_history_never_returns_the_future(gb_csv):
    clock = FrozenClock(datetime(2022, 6, 10, 14, 45, tzinfo=UTC))
    csv = make_provider(f"csv:{gb_csv}", clock=clock)
    points = csv.history("GB", datetime(2022, 6, 9, tzinfo=UTC), datetime(2022, 6, 12, tzinfo=UTC))
    assert points[0].start == datetime(2022, 6, 9, tzinfo=UTC)
    assert points[-1].start <= datetime(2022, 6, 10, 14, tzinfo=UTC)


def test_forecast_is_causal_and_oracle_is_opt_in(gb_csv, gb_points, tmp_path):
    now = datetime(2022, 6, 10, 14, 45, tzinfo=UTC)
    forecast = make_provider(f"csv:{gb_csv}", clock=FrozenClock(now)).forecast("GB", 48)
    assert len(forecast) == 48 and forecast[0].start == datetime(2022, 6, 10, 15, tzinfo=UTC)
    assert all(p.kind == Kind.FORECAST for p in forecast)
    # Rewrite every row after 'now' (the future): the forecast made at 'now' must not change.
    lines = gb_csv.read_text(encoding="utf-8-sig").splitlines()
    header, rows = lines[0], lines[1:]
    cut = now.strftime("%Y-%m-%d %H")
    changed = []
    for row in rows:
        if row[:13].replace("T", " ") > cut:
            cells = row.split(",")
            cells[4] = "999"
            row = ",".join(cells)
        changed.append(row)
    altered = tmp_path / "GB_altered.csv"
    altered.write_text("\n".join([header, *changed]) + "\n", encoding="utf-8")
    again = make_provider(f"csv:{altered}", clock=FrozenClock(now)).forecast("GB", 48)
    assert [p.intensity_g_per_kwh for p in again] == [p.intensity_g_per_kwh for p in forecast]
    oracle = make_provider(f"csv:{gb_csv}", clock=FrozenClock(now), oracle=True).forecast("GB", 3)
    assert [p.intensity_g_per_kwh for p in oracle] == [
        gb_points[datetime(2022, 6, 10, 15 + i, tzinfo=UTC)].intensity_g_per_kwh for i in range(3)
    ]


def test_lca_column_and_wrong_zone(gb_csv):
    clock = FrozenClock(datetime(2022, 6, 10, 14, tzinfo=UTC))
    lca = make_provider(f"csv:{gb_csv}", clock=clock, column="lca").latest("GB")
    direct = make_provider(f"csv:{gb_csv}", clock=clock).latest("GB")
    assert lca.emission_factor == EmissionFactor.LIFECYCLE and lca.intensity_g_per_kwh > direct.intensity_g_per_kwh
    with pytest.raises(SignalError, match="DE"):
        make_provider(f"csv:{gb_csv}", clock=clock).latest("DE")


def test_outside_the_trace_is_a_signal_error(gb_csv):
    clock = FrozenClock(datetime(2030, 1, 1, tzinfo=UTC))
    csv = make_provider(f"csv:{gb_csv}", clock=clock, replay_start="2022-12-31T23:30:00Z", speedup=1)
    clock.advance(3600)
    with pytest.raises(SignalError, match="outside"):
        csv.latest("GB")


@pytest.mark.parametrize(
    ("zone", "low", "high"),
    [("GB", 100, 400), ("DE-LU", 250, 600), ("FR", 20, 120), ("US-CAL-CISO", 100, 350), ("SE-SE3", 5, 60),
     ("ZA", 500, 1000)],
)
def test_static_values_are_labelled_static(zone, low, high):
    clock = FrozenClock(datetime(2026, 11, 21, 20, 30, tzinfo=UTC))
    point = make_provider("static", clock=clock).latest(zone)
    assert point.kind == Kind.STATIC and point.provider == "static" and point.zone == zone
    assert low <= point.intensity_g_per_kwh <= high
    assert point.start == datetime(2026, 11, 21, 20, tzinfo=UTC)


def test_static_california_is_egrid_converted_from_lbs():
    from codecarbon.input import DataSource

    lbs = DataSource().get_country_emissions_data("usa")["california"]["emissions"]
    point = make_provider("static").latest("US-CAL-CISO")
    assert point.intensity_g_per_kwh == pytest.approx(lbs * 0.45359237)


def test_static_unknown_zone_says_how_to_find_valid_ones():
    with pytest.raises(SignalError, match="electricitymaps"):
        make_provider("static").latest("XX-NOWHERE")


def test_make_provider_errors_name_the_problem():
    with pytest.raises(ConfigError, match="valid: .*electricitymaps"):
        make_provider("carbonfairy")
    with pytest.raises(ConfigError, match="csv"):
        make_provider("csv:")
    with pytest.raises(ConfigError, match="does not use HTTP"):
        make_provider("static", api_base="http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="cannot read trace"):
        make_provider("csv:/nonexistent/trace.csv")
    with pytest.raises(ConfigError, match="api_base"):
        make_provider("ukgrid", api_base="ftp://example")
    assert {"electricitymaps", "watttime", "ukgrid", "csv", "static"} <= set(provider_names())


def test_make_provider_disk_cache_shares_answers(gb_csv, tmp_path):
    clock = FrozenClock(datetime(2022, 6, 10, 14, 45, tzinfo=UTC))
    a = make_provider(f"csv:{gb_csv}", clock=clock, cache_dir=tmp_path)
    first = a.latest("GB")
    assert any(tmp_path.iterdir())  # written to disk for other processes
    b = make_provider(f"csv:{gb_csv}", clock=clock, cache_dir=tmp_path)
    assert b.latest("GB") == first and b.cache.hits == 1
