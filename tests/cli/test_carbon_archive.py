"""`greentrain carbon record | archive | skill` and `simulate --forecast-archive`, end to end: a round trip
record → export → import → replay, WattTime's past forecasts from recorded bodies, and one-line errors."""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "signals"))
from gt_signal_server import Reply, Request, SignalServer, recorded  # noqa: E402

from greentrain.cli import main  # noqa: E402
from greentrain.signals.archive.store import ForecastArchive  # noqa: E402
from greentrain.signals.base import Kind  # noqa: E402
from greentrain.signals.archive.recording import ArchiveRecorder  # noqa: E402
from greentrain.signals.trace import load_trace  # noqa: E402

pytestmark = pytest.mark.timeout(120)

USER, PASSWORD = "gt-user", "wt-pass-5d0c3a"
LB = 0.45359237


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def trace_path(carbon_trace) -> Path:
    return carbon_trace("DE-LU_2022_hourly.csv")


def record_issues(trace_path: Path, path: Path, first_h: int, issues: int, horizon_h: int = 36) -> None:
    """What `carbon record` does each hour, for ``issues`` hours of a real trace: a forecast (the actual future
    × noise growing with the horizon) written under its issue time, and the hour's actual."""
    trace = load_trace(trace_path)
    rng = np.random.default_rng(7)
    recorder = ArchiveRecorder(path)
    for t in range(first_h, first_h + issues):
        ahead = trace[t + 1: t + 1 + horizon_h]
        noise = np.exp(0.08 * np.sqrt(np.arange(1, len(ahead) + 1) / 24) * rng.standard_normal(len(ahead)))
        forecast = [replace(p, intensity_g_per_kwh=p.intensity_g_per_kwh * float(f), kind=Kind.FORECAST,
                            provider="fc") for p, f in zip(ahead, noise)]
        assert recorder.record_forecast(forecast, issued_at=trace[t].start, provider="fc", zone="DE") == len(ahead)
        recorder.record_actuals([replace(trace[t], provider="fc")])
    recorder.close()


def test_round_trip_record_export_import_replay(trace_path: Path, tmp_path: Path, capsys) -> None:
    recorded_path, imported_path = tmp_path / "recorded.sqlite", tmp_path / "imported.sqlite"
    record_issues(trace_path, recorded_path, first_h=24 * 40, issues=24 * 6)
    code, _, err = run(["carbon", "archive", "export", "--archive", str(recorded_path), "--csv",
                        "--output", str(tmp_path / "fc.csv")], capsys)
    assert code == 0 and "wrote 5184 rows of fc/DE" in err
    code, _, err = run(["carbon", "archive", "import", "--archive", str(imported_path), str(tmp_path / "fc.csv"),
                        "--provider", "fc", "--zone", "DE"], capsys)
    assert code == 0 and "144 forecasts, 5184 new rows" in err
    code, again, _ = run(["carbon", "archive", "export", "--archive", str(imported_path), "--csv"], capsys)
    assert again == (tmp_path / "fc.csv").read_text()
    replays = []
    for archive in (recorded_path, imported_path, tmp_path / "fc.csv"):
        code, out, err = run(["simulate", "--trace", str(trace_path), "--start", "2022-02-14T05Z",
                              "--work-hours", "6", "--deadline-hours", "20", "--forecast-archive", str(archive),
                              "--json"], capsys)
        assert code == 0, err
        replays.append(json.loads(out))
    summaries = [r["summary"] for r in replays]
    assert replays[0]["runs"] == replays[1]["runs"] == replays[2]["runs"]  # the same decisions from all three
    assert summaries[0]["forecast_archive"]["fallback_hours"] == 0 and summaries[0]["deadlines_missed"] == 0
    assert summaries[0]["forecast_archive"]["issues"] == 144
    code, out, _ = run(["carbon", "skill", "--archive", str(recorded_path), "--zone", "DE", "--hours", "24",
                        "--json"], capsys)
    first_hour = json.loads(out)["sources"]["fc"][0]
    assert code == 0 and first_hour["count"] == 143 and 0 < first_hour["mape"] < 0.05


def test_replay_counts_the_hours_an_archive_gap_left_to_the_trace(trace_path: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "gappy.sqlite"
    record_issues(trace_path, path, first_h=24 * 40, issues=24 * 4, horizon_h=12)  # ends 2022-02-14 00:00
    code, out, err = run(["simulate", "--trace", str(trace_path), "--start", "2022-02-14T03Z", "--work-hours", "8",
                          "--deadline-hours", "20", "--forecast-archive", str(path), "--forecast-blend", "latest"],
                         capsys)
    assert code == 0, err
    # Issues stop at 23:00; from 06:00 (7 h later) every decision is the trace-only forecaster's.
    line = " ".join(out[out.index("forecasts as issued"):].split())
    assert "blend latest" in line and "within 6 h (archive gap)" in line
    fallback, hours = line.split(" decision hours")[0].rsplit(" ", 3)[1::2]
    assert int(fallback) == int(hours) - 3  # 03:00, 04:00 and 05:00 had a forecast at most 6 h old


def test_record_on_a_schedule_against_a_local_watttime(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("WATTTIME_USER", USER)
    monkeypatch.setenv("WATTTIME_PASSWORD", PASSWORD)
    body = json.loads(recorded("watttime_v3_forecast.json"))

    served = []

    def forecast(request: Request) -> Reply:
        # The recorded body's shape, with point times from now on (a live forecast, revised at each fetch).
        first = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=5)
        served.append(first)
        data = [{"point_time": (first + timedelta(minutes=5 * i)).isoformat(), "value": 900.0 + i + len(served)}
                for i in range(12 * 3)]
        return Reply(body=json.dumps({**body, "data": data}).encode())

    path = tmp_path / "wt.sqlite"
    with SignalServer() as server:
        server.route("/login", Reply(body=b'{"token": "jwt-1"}'))
        server.route("/v3/forecast", forecast)
        server.route("/v3/historical", Reply(body=recorded("watttime_v3_historical.json")))
        code, out, err = run(["carbon", "record", "--zone", "CAISO_NORTH", "--provider", "watttime", "--every", "1s",
                              "--count", "2", "--archive", str(path), "--api-base", server.url], capsys)
    assert code == 0, err
    assert out.count("watttime CAISO_NORTH: ") == 2 and "recording watttime forecasts" in err
    with ForecastArchive(path, create=False) as archive:
        (series,) = archive.series()
        issued, _target, value = archive.forecast_rows("watttime", "CAISO_NORTH")
    assert series.provider == "watttime" and len(set(issued.tolist())) == 2
    assert value.min() >= 900 * LB and value.max() <= 940 * LB  # hourly means of lbs/MWh converted to g/kWh
    assert PASSWORD not in out + err


def _watttime_server(server: SignalServer, historical) -> None:
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    server.route("/login", lambda r: Reply(body=b'{"token": "jwt-9"}') if r.headers.get("authorization") == expected
                 else Reply(status=401, body=b'{"error": "bad credentials"}'))
    server.route("/v3/forecast/historical", historical)


def test_import_watttime_historical_from_the_recorded_body(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("WATTTIME_USER", USER)
    monkeypatch.setenv("WATTTIME_PASSWORD", PASSWORD)
    path = tmp_path / "wt.sqlite"
    with SignalServer() as server:
        _watttime_server(server, Reply(body=recorded("watttime_v3_forecast-historical.json")))
        code, _, err = run(["carbon", "archive", "import", "--watttime-historical", "--zone", "CAISO_NORTH",
                            "--start", "2022-07-15T00:00Z", "--end", "2022-07-15T01:00Z", "--archive", str(path),
                            "--api-base", server.url], capsys)
        (request,) = server.hits("/v3/forecast/historical")
    assert code == 0, err
    assert request.query["start"] == ["2022-07-15T00:00:00+00:00"] and request.query["region"] == ["CAISO_NORTH"]
    with ForecastArchive(path, create=False) as archive:
        issued, target, value = archive.forecast_rows("watttime", "CAISO_NORTH")
    start = int(datetime(2022, 7, 15, tzinfo=UTC).timestamp())
    # One forecast generated at 00:00: its three 5-minute values (all 870 lbs/MWh) make the 00:00 hour.
    assert issued.tolist() == [start] and target.tolist() == [start] and value.tolist() == pytest.approx([870 * LB])


def test_import_watttime_historical_keeps_one_forecast_per_period(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("WATTTIME_USER", USER)
    monkeypatch.setenv("WATTTIME_PASSWORD", PASSWORD)
    template = json.loads(recorded("watttime_v3_forecast-historical.json"))

    def historical(request: Request) -> Reply:
        # Every five minutes in the asked range, a forecast shaped like the recorded one, two hours long.
        start = datetime.fromisoformat(request.query["start"][0])
        data = []
        for k in range(12):
            generated = start + timedelta(minutes=5 * k)
            data.append({"generated_at": generated.isoformat(),
                         "forecast": [{"point_time": (generated + timedelta(minutes=5 * i)).isoformat(),
                                       "value": 800 + k} for i in range(24)]})
        return Reply(body=json.dumps({**template, "data": data}).encode())

    path = tmp_path / "wt.sqlite"
    with SignalServer() as server:
        _watttime_server(server, historical)
        code, _, err = run(["carbon", "archive", "import", "--watttime-historical", "--zone", "CAISO_NORTH",
                            "--start", "2022-07-15T00:00Z", "--end", "2022-07-15T03:00Z", "--every", "30m",
                            "--archive", str(path), "--api-base", server.url], capsys)
        assert len(server.hits("/v3/forecast/historical")) == 3  # an hour of issues per request
    assert code == 0, err
    assert "6 past forecasts" in err and "30 thinned out by --every" in err
    with ForecastArchive(path, create=False) as archive:
        issued, _target, _value = archive.forecast_rows("watttime", "CAISO_NORTH")
    start = int(datetime(2022, 7, 15, tzinfo=UTC).timestamp())
    assert sorted(set(issued.tolist())) == [start + 1800 * k for k in range(6)]


def test_import_watttime_historical_needs_credentials(tmp_path: Path, capsys, monkeypatch) -> None:
    for name in ("WATTTIME_USER", "WATTTIME_PASSWORD", "WATTTIME_PASSWORD_FILE"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run(["carbon", "archive", "import", "--watttime-historical", "--zone", "CAISO_NORTH",
                        "--start", "2022-07-15T00:00Z", "--end", "2022-07-15T03:00Z",
                        "--archive", str(tmp_path / "a.sqlite")], capsys)
    assert code == 2 and err.count("\n") == 1 and "WATTTIME_USER" in err


def test_bad_archives_get_one_line_and_exit_2(trace_path: Path, tmp_path: Path, capsys) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\x00\xff" * 4000)
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("issued_at,target_time,intensity_g_per_kwh\n2022-02-14T00:00Z,2022-02-13T23:00Z,100\n",
                       encoding="utf-8")
    other_zone = tmp_path / "gb.sqlite"
    with ForecastArchive(other_zone) as archive:
        archive.write("fc", "GB", forecasts=[(0, 3600, 1.0)])
        archive.write("fc2", "GB", forecasts=[(0, 3600, 1.0)])
    base = ["simulate", "--trace", str(trace_path), "--start", "2022-02-14T05Z", "--work-hours", "4",
            "--deadline-hours", "20", "--forecast-archive"]
    for archive_path, expected in ((corrupt, f"{corrupt}: open: not a usable forecast archive"),
                                   (bad_csv, f"{bad_csv}:2: target_time"),
                                   (other_zone, "has no series in g_per_kwh for zone 'DE'")):
        code, out, err = run(base + [str(archive_path)], capsys)
        assert code == 2 and expected in err and err.count("\n") == 1 and "Traceback" not in err, err
    code, _, err = run(["carbon", "archive", "export", "--archive", str(other_zone), "--csv"], capsys)
    assert code == 2 and "has several series (fc/GB, fc2/GB); name one" in err
    assert corrupt.exists()  # a reader reports a corrupt file; it does not move the user's file


def test_foreign_rows_in_an_archive_are_skipped_and_counted(trace_path: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "mixed.sqlite"
    record_issues(trace_path, path, first_h=24 * 40, issues=24 * 4)
    with ForecastArchive(path) as archive:
        archive.write("fc", "GB", forecasts=[(0, 3600, 1.0), (0, 7200, 2.0)])  # another zone
    import sqlite3

    db = sqlite3.connect(path)  # what another program might have left: rows our writer would never write
    series = db.execute("SELECT id FROM series WHERE provider = 'fc' AND zone = 'DE'").fetchone()[0]
    first = int(datetime(2022, 2, 13, tzinfo=UTC).timestamp())
    db.executemany("INSERT INTO forecasts VALUES (?, ?, ?, ?)", [
        (series, first + 1, first + 3600, -5.0),              # negative value
        (series, first + 2, first - 3600, 100.0),             # target before its issue
        (series, "yesterday", first + 7200, 100.0),           # not a time
    ])
    db.execute("INSERT INTO series (provider, zone, unit) VALUES ('fc-lbs', 'DE', 'lbs_per_mwh')")
    db.execute("INSERT INTO forecasts VALUES (last_insert_rowid(), 0, 3600, 900.0)")
    db.commit()
    db.close()
    code, out, err = run(["simulate", "--trace", str(trace_path), "--start", "2022-02-13T05Z", "--work-hours", "4",
                          "--deadline-hours", "12", "--forecast-archive", str(path), "--archive-provider", "fc",
                          "--json"], capsys)
    assert code == 0, err
    skipped = json.loads(out)["summary"]["forecast_archive"]["skipped_rows"]
    assert skipped == {
        "rows of fc/GB (g_per_kwh): another zone, provider or unit": 2,
        "rows of fc-lbs/DE (lbs_per_mwh): another zone, provider or unit": 1,
        "rows with non-integer times or a non-numeric value": 1,
        "negative or non-numeric values": 1,
        "targets before their issue time": 1,
    }
