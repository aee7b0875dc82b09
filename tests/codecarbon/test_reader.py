"""Reading CodeCarbon's emissions.csv by column name: the installed version's files, older and newer column
sets, cumulative flush rows, and bad input as one line naming the file and the column or row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from greentrain.codecarbon import location_for, read_emissions, zone_for
from greentrain.codecarbon.columns import V1_COLUMNS, V2_COLUMNS, V3_COLUMNS, installed_columns
from greentrain.errors import ConfigError


def write(tmp_path: Path, header: tuple[str, ...] | list[str], rows: list[dict[str, object]],
          name: str = "emissions.csv") -> Path:
    lines = [",".join(header)] + [",".join(str(row.get(c, "")) for c in header) for row in rows]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


RUN = {"timestamp": "2022-03-01T14:30:00", "project_name": "p", "run_id": "r1", "experiment_id": "e",
       "duration": 7200, "emissions": 0.5, "energy_consumed": 2.0, "country_name": "United Kingdom",
       "country_iso_code": "GBR", "region": "", "gpu_model": "1 x NVIDIA A40", "gpu_count": 1, "gpu_energy": 1.6}


def test_the_installed_codecarbon_writes_the_columns_greentrain_knows(codecarbon_written: Path) -> None:
    header = codecarbon_written.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert tuple(header) == installed_columns() == V3_COLUMNS
    found = read_emissions(codecarbon_written)
    assert [r.project_name for r in found.runs] == ["first", "second"] and not found.skipped
    assert found.unknown_columns == ()
    for run in found.runs:
        assert run.duration_s > 0 and run.energy_kwh > 0 and run.emissions_kg is not None
        assert zone_for(run.country_iso_code, run.region, run.country_name) == "GB"
        assert abs(run.ended_at - datetime.now().astimezone(UTC)) < timedelta(hours=25)


@pytest.mark.parametrize("columns", [V1_COLUMNS, V2_COLUMNS, V3_COLUMNS + ("a_future_column",)],
                         ids=["v1", "v2", "newer"])
def test_older_and_newer_column_sets_are_read_by_name(tmp_path: Path, columns: tuple[str, ...]) -> None:
    shuffled = list(reversed(columns))  # by name, not by position
    found = read_emissions(write(tmp_path, shuffled, [{**RUN, "a_future_column": "x"}]))
    [run] = found.runs
    assert (run.duration_s, run.energy_kwh, run.emissions_kg, run.country_iso_code) == (7200, 2.0, 0.5, "GBR")
    assert run.started_at == datetime(2022, 3, 1, 12, 30, tzinfo=UTC)
    assert run.power_w == pytest.approx(1000.0)
    assert run.gpu_energy_kwh == (1.6 if "gpu_energy" in columns else None)
    assert found.unknown_columns == (("a_future_column",) if "a_future_column" in columns else ())


def test_naive_timestamps_are_read_in_the_zone_given(tmp_path: Path) -> None:
    path = write(tmp_path, V2_COLUMNS, [RUN])
    [run] = read_emissions(path, timestamps_tz=timezone(timedelta(hours=2))).runs
    assert run.ended_at == datetime(2022, 3, 1, 12, 30, tzinfo=UTC)


def test_cumulative_flush_rows_of_one_run_count_once(tmp_path: Path) -> None:
    rows = [{**RUN, "duration": 60, "energy_consumed": 0.1}, {**RUN, "duration": 120, "energy_consumed": 0.2},
            {**RUN, "run_id": "r2"}]
    found = read_emissions(write(tmp_path, V3_COLUMNS, rows))
    assert [(r.row, r.run_id, r.duration_s) for r in found.runs] == [(3, "r1", 120), (4, "r2", 7200)]
    assert found.notes == ["run r1: rows 2 are earlier totals of row 3; row 3 used"]


def test_a_partial_file_keeps_the_rows_it_can_use_and_names_the_others(tmp_path: Path) -> None:
    path = write(tmp_path, V2_COLUMNS, [RUN, {}, {**RUN, "duration": "abc", "run_id": "x"},
                                        {**RUN, "energy_consumed": 0, "run_id": "y"},
                                        {**RUN, "timestamp": "yesterday", "run_id": "z"}])
    with path.open("a", encoding="utf-8") as handle:
        handle.write("2022-03-01T14:30:00,p,short\n")
    found = read_emissions(path)
    assert [r.row for r in found.runs] == [2]
    assert [(s.row, s.reason) for s in found.skipped] == [
        (3, "empty row"), (4, "column 'duration': 'abc' is not a number"),
        (5, "energy_consumed is 0 kWh: nothing was measured"),
        (6, "column 'timestamp': 'yesterday' is not an ISO-8601 time"),
        (7, f"3 fields, the header has {len(V2_COLUMNS)}")]


@pytest.mark.parametrize(("content", "expected"), [
    (b"", "empty file, no header row"),
    (b"timestamp,duration,energy_consumed_kwh\n2022-03-01T00:00:00,60,1\n",
     "no column 'energy_consumed' (did you mean 'energy_consumed_kwh'?)"),
    (b"timestamp,duration,duration,energy_consumed\n", "column 'duration' appears twice"),
    (b"timestamp,duration,energy_consumed,country_name\n2022-03-01T00:00:00,60,1,R\xe9union\n",
     ":2: column 'country_name': byte 0xe9 is not UTF-8"),
    (b"timestamp,duration,energy_consumed\n,,\n2022-03-01T00:00:00,0,1\n", ":2: empty row"),
    (b"timestamp,duration,energy_consumed\n", "no rows after the header"),
])
def test_bad_files_are_one_line_naming_the_file_and_the_column_or_row(tmp_path: Path, content: bytes,
                                                                     expected: str) -> None:
    path = tmp_path / "emissions.csv"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        read_emissions(path)
    first = str(caught.value).splitlines()[0]
    assert first.startswith(str(path)) and expected in first, str(caught.value)


def test_locations_map_to_zones_both_ways() -> None:
    assert zone_for("GBR") == "GB" and zone_for("", country_name="Germany") == "DE"
    assert zone_for("USA", "california") == "US-CAL-CISO" and zone_for("USA", "") == "US"
    assert zone_for("XXX") is None and zone_for("") is None
    assert location_for("GB") == ("United Kingdom", "GBR", "")
    assert location_for("US-CAL-CISO") == ("United States", "USA", "california")
    assert location_for("DE-LU") == ("Germany", "DEU", "") and location_for(None) == ("", "", "")


def test_greentrain_whatif_reads_what_codecarbon_wrote(codecarbon_written: Path, carbon_trace,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from greentrain.cli import main

    main(["whatif", str(codecarbon_written), "--trace", str(carbon_trace("GB_2022_hourly.csv")), "--json"])
    doc = json.loads(capsys.readouterr().out)
    runs = doc["files"][0]["runs"]
    assert [r["project_name"] for r in runs] == ["first", "second"] and doc["files"][0]["skipped"] == []
    assert all(r["zone"] == "GB" and r["signal"].endswith("same date and hour in 2022") for r in runs)
    assert doc["summary"]["energy_kwh"] == pytest.approx(sum(r.energy_kwh for r in read_emissions(
        codecarbon_written).runs), abs=1e-9)  # totals are rounded to 1e-9 kWh
