"""``greentrain simulate --trace ZONE=FILE ...``: the JSON carries each segment's zone; bad traces are listed
at once, one line each, exit 2."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from tests.cli.test_simulate import HEADER, T0, run_cli

pytestmark = pytest.mark.timeout(120)


def write_zone(tmp_path: Path, name: str, values: list[float]) -> Path:
    rows = [HEADER] + [f"{(T0 + timedelta(hours=i)):%Y-%m-%d %H:%M:%S},X,X,{name},{v},{v},0,0,test,false,"
                       for i, v in enumerate(values)]
    path = tmp_path / f"{name}.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_json_gives_each_segment_its_zone(tmp_path, capsys):
    home = write_zone(tmp_path, "A", [100, 100, 900, 900] + [600] * 8)
    away = write_zone(tmp_path, "B", [300] * 4 + [50] * 8)
    code, out, err = run_cli(capsys, "--trace", f"A={home}", "--trace", f"B={away}", "--start",
                             "2022-03-01T00:00Z", "--work-hours", "4", "--deadline-hours", "10",
                             "--idle-power-kw", "0", "--policy", "forecast-optimal", "--forecaster", "perfect",
                             "--migration-overhead-min", "15", "--json")
    assert code == 0, err
    doc = json.loads(out)
    [run] = doc["runs"]
    assert run["segments"] == [{"start": "2022-03-01T04:00:00Z", "end": "2022-03-01T08:00:00Z", "zone": "B"}]
    assert run["migrations"] == 0 and run["emissions_by_zone_g"] == {"B": 200.0}
    assert run["baselines"]["greenest_at_start"]["zone"] == "A"
    assert set(run["baselines"]["oracle_by_zone"]) == {"A", "B"}
    summary = doc["summary"]
    assert summary["zones"] == ["A", "B"] and summary["home"] == "A"
    assert summary["emissions_by_zone_g"] == {"A": 0.0, "B": 200.0}
    assert summary["saving_vs_stay_home"] > 0.5 and summary["migration_overhead_min"] == 15


def test_text_report_names_the_zones(tmp_path, capsys):
    home = write_zone(tmp_path, "A", [100, 100, 900, 900] + [600] * 8)
    away = write_zone(tmp_path, "B", [300] * 4 + [50] * 8)
    code, out, err = run_cli(capsys, "--trace", f"A={home}", "--trace", f"B={away}", "--start",
                             "2022-03-01T00:00Z", "--work-hours", "4", "--deadline-hours", "10",
                             "--forecaster", "perfect")
    assert code == 0, err
    text = " ".join(out.split())  # the summary line wraps at the console's width
    assert "across A, B (home A)" in text and "saving vs stay-home" in text and "emissions by zone: A 0 g, B 200 g" in text


def test_bad_traces_are_listed_at_once(tmp_path, capsys):
    good = write_zone(tmp_path, "A", [100] * 12)
    empty = tmp_path / "empty.csv"
    empty.write_text(HEADER + "\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "--trace", f"A={good}", "--trace", "=nozone.csv", "--trace", f"a={good}",
                           "--trace", f"C={tmp_path / 'missing.csv'}", "--trace", f"D={empty}",
                           "--trace", str(good), "--start", "2022-03-01T00:00Z", "--work-hours", "2",
                           "--deadline-hours", "5")
    assert code == 2
    lines = err.strip().splitlines()
    assert all(line.startswith("greentrain: error: --trace ") for line in lines), err
    assert any("'=nozone.csv': expected FILE, or ZONE=FILE" in line for line in lines)
    assert any("zone a is given twice" in line for line in lines)
    assert any("no such file" in line and "missing.csv" in line for line in lines)
    assert any("has no rows" in line and "empty.csv" in line for line in lines)
    assert any("with several traces give each as ZONE=FILE" in line for line in lines)
    assert len(lines) == 5 and "Traceback" not in err


def test_a_trace_too_short_for_the_deadline_is_named(tmp_path, capsys):
    home = write_zone(tmp_path, "A", [100] * 12)
    away = write_zone(tmp_path, "B", [100] * 3)
    code, _, err = run_cli(capsys, "--trace", f"A={home}", "--trace", f"B={away}", "--start",
                           "2022-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "5")
    assert code == 2 and "--trace B:" in err and "too short" in err


def test_one_zone_given_as_zone_file_is_the_one_trace_form(tmp_path, capsys):
    home = write_zone(tmp_path, "A", [5, 1, 9, 1, 5, 2, 2, 2])
    code, out, err = run_cli(capsys, "--trace", f"A={home}", "--start", "2022-03-01T00:00Z", "--work-hours",
                             "2", "--deadline-hours", "5", "--forecaster", "perfect", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "schedule" in doc["runs"][0] and "oracle" in doc["runs"][0]["baselines"]


@pytest.mark.parametrize("minutes", ["60", "-1"])
def test_a_migration_overhead_out_of_range_is_one_line(tmp_path, capsys, minutes):
    home = write_zone(tmp_path, "A", [100] * 12)
    away = write_zone(tmp_path, "B", [100] * 12)
    code, _, err = run_cli(capsys, "--trace", f"A={home}", "--trace", f"B={away}", "--start",
                           "2022-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "5",
                           "--migration-overhead-min", minutes)
    assert code == 2 and err.count("\n") == 1 and "--migration-overhead-min: must be in [0, 60) minutes" in err
