"""The forecast archive: SQLite rows as issued, concurrent writers, size cap, corrupt or locked files, CSV."""

from __future__ import annotations

import multiprocessing
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from greentrain.errors import ConfigError
from greentrain.signals.archive.store import ArchiveError, ForecastArchive
from greentrain.signals.archive.longcsv import read_forecast_csv, write_forecast_csv
from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.archive.recording import ArchiveRecorder, default_archive_path, hourly_rows

pytestmark = pytest.mark.timeout(120)

T0 = datetime(2022, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
S0 = int(T0.timestamp())


def forecast_points(issued: datetime, values: list[float], step: timedelta = HOUR) -> list[IntensityPoint]:
    first = issued.replace(minute=0, second=0, microsecond=0)
    return [IntensityPoint(start=first + i * step, end=first + (i + 1) * step, intensity_g_per_kwh=v,
                           kind=Kind.FORECAST, provider="wt", zone="CAISO_NORTH") for i, v in enumerate(values)]


def test_rows_as_issued_in_wal_mode_with_the_view(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    with ForecastArchive(path) as archive:
        added = archive.write("wt", "CAISO_NORTH", forecasts=[(S0, S0 + 3600, 100.0), (S0, S0 + 7200, 110.0)],
                              actuals=[(S0 + 3600, 95.0)])
        assert added == 3
        assert archive.write("wt", "CAISO_NORTH", forecasts=[(S0, S0 + 3600, 999.0)]) == 0  # kept as first issued
        issued, target, value = archive.forecast_rows("wt", "CAISO_NORTH")
        assert issued.tolist() == [S0, S0] and target.tolist() == [S0 + 3600, S0 + 7200]
        assert value.tolist() == [100.0, 110.0]
        (series,) = archive.series()
        assert (series.provider, series.zone, series.unit, series.forecast_rows, series.actual_rows) == (
            "wt", "CAISO_NORTH", "g_per_kwh", 2, 1)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT provider, zone, issued_at, target_time, value, unit FROM forecast_rows "
                      "ORDER BY target_time").fetchall() == [
        ("wt", "CAISO_NORTH", S0, S0 + 3600, 100.0, "g_per_kwh"), ("wt", "CAISO_NORTH", S0, S0 + 7200, 110.0,
                                                                    "g_per_kwh")]
    db.close()


def test_recorder_writes_whole_hours_from_the_issue_time_once(tmp_path: Path) -> None:
    recorder = ArchiveRecorder(tmp_path / "a.sqlite")
    issued = T0 + timedelta(minutes=40)
    half_hours = forecast_points(issued, [100, 102, 104, 106, 108, 110], step=timedelta(minutes=30))
    assert recorder.record_forecast(half_hours, issued_at=issued, provider="ukgrid", zone="GB") == 2
    assert recorder.record_forecast(half_hours, issued_at=issued, provider="ukgrid", zone="GB") == 0  # same fetch
    with ForecastArchive(tmp_path / "a.sqlite", create=False) as archive:
        issued_s, target, value = archive.forecast_rows("ukgrid", "GB")
    # 00:00 starts before the 00:40 issue: left out. 01:00 and 02:00 are the means of their half-hours.
    assert target.tolist() == [S0 + 3600, S0 + 7200] and value.tolist() == [105.0, 109.0]
    assert issued_s.tolist() == [S0 + 2400] * 2
    # An actual of half an hour is not the hour's actual.
    actual = [IntensityPoint(start=T0, end=T0 + timedelta(minutes=30), intensity_g_per_kwh=1.0, kind=Kind.ACTUAL,
                             provider="ukgrid", zone="GB")]
    assert hourly_rows(actual) == [] and recorder.record_actuals(actual) == 0
    recorder.close()


def test_size_cap_prunes_the_oldest_forecasts(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    cap = 1 << 20
    with ForecastArchive(path, max_bytes=cap) as archive:
        for issue in range(1000):
            issued_s = S0 + 3600 * issue
            archive.write("wt", "Z", forecasts=[(issued_s, issued_s + 3600 * h, 100.0 + h) for h in range(1, 73)])
        archive.prune()
        assert archive.pruned_rows > 0
        assert archive.size_bytes() <= cap
        issued, _target, _value = archive.forecast_rows("wt", "Z")
        assert issued.max() == S0 + 3600 * 999  # the newest forecast is kept
        assert issued.min() > S0  # the oldest went first


def test_a_corrupt_file_is_set_aside_and_recording_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "forecasts.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\x07" * 8192)
    problems: list[str] = []
    recorder = ArchiveRecorder(path, on_problem=problems.append)
    assert recorder.record_forecast(forecast_points(T0, [1, 2, 3]), issued_at=T0, provider="wt", zone="Z") == 3
    (aside,) = recorder.set_aside
    assert aside.name.startswith("forecasts.sqlite.corrupt-") and aside.read_bytes()[16:24] == b"\x07" * 8
    assert len(problems) == 1 and str(path) in problems[0] and "set aside" in problems[0]
    with ForecastArchive(path, create=False) as archive:
        assert archive.check() == "ok" and archive.series()[0].forecast_rows == 3
    recorder.close()


def test_a_locked_file_costs_one_write_not_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    ForecastArchive(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process in the middle of a long write
    problems: list[str] = []
    recorder = ArchiveRecorder(path, on_problem=problems.append, busy_timeout_s=0.2)
    points = forecast_points(T0, [1, 2, 3])
    assert recorder.record_forecast(points, issued_at=T0, provider="wt", zone="Z") == 0
    assert recorder.skipped_writes == 1 and "locked" in problems[0] and not recorder.disabled
    holder.execute("COMMIT")
    holder.close()
    later = T0 + HOUR
    assert recorder.record_forecast(forecast_points(later, [4, 5, 6]), issued_at=later, provider="wt", zone="Z") == 3
    recorder.close()


def test_another_programs_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (text TEXT)")
    db.commit()
    db.close()
    problems: list[str] = []
    recorder = ArchiveRecorder(path, on_problem=problems.append)
    assert recorder.record_forecast(forecast_points(T0, [1.0]), issued_at=T0, provider="wt", zone="Z") == 0
    assert recorder.disabled and recorder.set_aside == [] and "not a greentrain forecast archive" in problems[0]
    with pytest.raises(ArchiveError, match="not a greentrain forecast archive"):
        ForecastArchive(path, create=False)


def _record_many(path: str, worker: int, issues: int) -> None:
    recorder = ArchiveRecorder(path, busy_timeout_s=30.0)
    for issue in range(issues):
        issued = T0 + timedelta(minutes=issue * 7 + worker)
        values = [float(worker * 1000 + issue + h) for h in range(24)]
        assert recorder.record_forecast(forecast_points(issued + HOUR, values), issued_at=issued,
                                        provider=f"p{worker % 2}", zone="Z") == 24
    recorder.close()


def test_concurrent_recorders_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_record_many, args=(str(path), w, 25)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(90)
        assert process.exitcode == 0
    with ForecastArchive(path, create=False) as archive:
        assert archive.check() == "ok"
        rows = {s.provider: s.forecast_rows for s in archive.series()}
    assert rows == {"p0": 2 * 25 * 24, "p1": 2 * 25 * 24}


def _write_forever(path: str, started) -> None:
    with ForecastArchive(path) as archive:
        issue = 0
        while True:
            issued_s = S0 + 60 * issue
            archive.write("wt", "Z", forecasts=[(issued_s, issued_s + 3600 * h, float(h)) for h in range(1, 721)])
            issue += 1
            if issue == 3:
                started.set()


def test_a_writer_killed_mid_write_leaves_whole_fetches_only(tmp_path: Path) -> None:
    path = tmp_path / "killed.sqlite"
    context = multiprocessing.get_context("spawn")
    started = context.Event()
    writer = context.Process(target=_write_forever, args=(str(path), started))
    writer.start()
    assert started.wait(60)
    writer.kill()  # SIGKILL: no cleanup, possibly inside a transaction
    writer.join(30)
    with ForecastArchive(path, create=False) as archive:
        assert archive.check() == "ok"
        issued, _target, _value = archive.forecast_rows("wt", "Z")
    counts = np.unique(issued, return_counts=True)[1]
    assert counts.size >= 3 and (counts == 720).all()  # every fetch whole, or not there at all


def test_default_path_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENTRAIN_FORECAST_ARCHIVE", "off")
    assert default_archive_path(tmp_path) is None
    monkeypatch.setenv("GREENTRAIN_FORECAST_ARCHIVE", str(tmp_path / "x.sqlite"))
    assert default_archive_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("GREENTRAIN_FORECAST_ARCHIVE")
    assert default_archive_path(tmp_path / "cache") == tmp_path / "cache" / "forecasts.sqlite"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_archive_path() == tmp_path / "xdg" / "greentrain" / "signals" / "forecasts.sqlite"


def test_csv_round_trip(tmp_path: Path) -> None:
    rows = [(S0, S0 + 3600, 101.5), (S0, S0 + 7200, 99.25), (S0 + 3600, S0 + 7200, 98.0)]
    path = tmp_path / "f.csv"
    with open(path, "w", encoding="utf-8") as handle:
        assert write_forecast_csv(rows, handle) == 3
    assert path.read_text().splitlines()[:2] == ["issued_at,target_time,intensity_g_per_kwh",
                                                 "2022-03-01T00:00:00Z,2022-03-01T01:00:00Z,101.5"]
    parsed = read_forecast_csv(path)
    assert list(zip(parsed.issued_s.tolist(), parsed.target_s.tolist(), parsed.value_g_per_kwh.tolist())) == rows


def test_csv_bad_rows_are_named_and_exact_repeats_counted(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("\n".join([
        "issued_at,target_time,intensity_g_per_kwh",
        "2022-03-01T00:00Z,2022-03-01T01:00Z,100",        # 2: fine
        "2022-03-01T00:00Z,2022-03-01T01:00Z,100",        # 3: exact repeat: skipped
        "2022-03-01T00:00+01:00,2022-03-01T01:00Z,100",   # 4: not UTC
        "2022-03-01T00:00,2022-03-01T01:00Z,100",         # 5: no time zone
        "2022-03-01T05:00Z,2022-03-01T01:00Z,100",        # 6: target before issue
        "2022-03-01T00:00Z,2022-03-01T02:00Z,-3",         # 7: negative
        "2022-03-01T00:00Z,2022-03-01T01:00Z,120",        # 8: overlaps row 2
    ]) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_forecast_csv(path)
    lines = str(info.value).splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [str(path)] * 5
    assert [line.split(": ", 1)[0].rsplit(":", 1)[1] for line in lines] == ["4", "5", "6", "7", "8"]
    assert "not UTC" in lines[0] and "no time zone" in lines[1] and "before issued_at" in lines[2]
    assert ">= 0" in lines[3] and "overlaps row 2" in lines[4]
    path.write_text("issued_at,target_time,intensity_g_per_kwh\n2022-03-01T00:00Z,2022-03-01T01:00Z,100\n"
                    "2022-03-01T00:00Z,2022-03-01T01:00Z,100\n", encoding="utf-8")
    assert read_forecast_csv(path).repeated_rows == 1


def test_csv_in_a_foreign_unit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lbs.csv"
    path.write_text("issued_at,target_time,intensity_lbs_per_mwh\n2022-03-01T00:00Z,2022-03-01T01:00Z,900\n",
                    encoding="utf-8")
    with pytest.raises(ConfigError, match=r"lbs.csv:1: column 'intensity_lbs_per_mwh' is in a unit"):
        read_forecast_csv(path)
