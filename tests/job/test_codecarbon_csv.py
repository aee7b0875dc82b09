"""``codecarbon_csv``: a job appends one CodeCarbon-compatible row per process, which CodeCarbon's own
writer, pandas and ``greentrain whatif`` all read back; a bad path fails before any work, a failed write
at the end is a warning."""

from __future__ import annotations

import csv
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from gt_engine_doubles import ClockMonitor, ThresholdPolicy, TraceSignals, hourly  # noqa: E402

from greentrain.cli import main
from greentrain.codecarbon import read_emissions
from greentrain.codecarbon.columns import V2_COLUMNS, installed_columns
from greentrain.clock import FrozenClock
from greentrain.errors import ConfigError
from greentrain.session import Session

pytestmark = pytest.mark.timeout(120)
T0 = datetime(2022, 2, 1, tzinfo=UTC)
STEP_S = 60.0


def run_job(tmp_path: Path, target: Path) -> list[Session]:
    """90 steps; the dirty second hour makes the first process checkpoint and a second one finish."""
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [100, 500, 500, 100, 100, 100]), clock)
    store: dict[str, int] = {}
    sessions = []
    while True:
        with Session(ThresholdPolicy(200), provider=signals, zone="GB", steps_total=90,
                     save=lambda s: store.update(step=s), load=lambda: store.get("step"), clock=clock,
                     relaunch="none", monitor=ClockMonitor(clock, power_w=120.0), progress=False,
                     decide_interval_s=60, deadline="+6", state_path=tmp_path / "st.json", job="cc-job",
                     codecarbon_csv=target) as session:
            for _step in range(session.start_step, 90):
                clock.advance(STEP_S)
                session.step()
                if session.should_stop:
                    break
        sessions.append(session)
        if session.finished:
            return sessions
        clock.advance((session.resume_at - clock.now()).total_seconds())


def test_one_row_per_process_adding_up_to_the_job(tmp_path: Path, carbon_trace, capsys) -> None:
    import pandas as pd
    from codecarbon.output_methods.emissions_data import EmissionsData
    from codecarbon.output_methods.file import FileOutput

    target = tmp_path / "emissions.csv"
    sessions = run_job(tmp_path, target)
    assert len(sessions) == 2
    table = pd.read_csv(target)
    assert tuple(table.columns) == installed_columns() and len(table) == 2
    stats = sessions[-1].job_stats.snapshot()
    assert table["energy_consumed"].sum() * 3.6e6 == pytest.approx(stats.energy_j)
    assert table["emissions"].sum() * 1000 == pytest.approx(stats.emissions_g)
    assert table["energy_consumed"].iloc[0] * 3.6e6 == pytest.approx(60 * STEP_S * 120)  # steps 0-59
    assert list(table["project_name"]) == ["cc-job"] * 2 and table["experiment_id"].nunique() == 1
    assert table["run_id"].nunique() == 2 and list(table["country_iso_code"]) == ["GBR"] * 2
    assert list(table["timestamp"]) == ["2022-02-01T01:00:00", "2022-02-01T03:30:00"]
    assert list(table["duration"]) == [3600.0, 1800.0]  # each process from its start (the wait is between)
    assert table["ram_energy"].isna().all()  # not measured: blank, never 0

    # CodeCarbon's own writer takes the file as its own: same columns, appended, not moved aside.
    output = FileOutput("emissions.csv", str(tmp_path))
    record = dict(zip(installed_columns(), table.iloc[0].tolist())) | {"run_id": "written-by-codecarbon"}
    data = EmissionsData(**{k: ("" if v != v else v) for k, v in record.items()})  # NaN -> blank
    assert output.has_valid_headers(data)
    output.out(data, None)
    assert len(pd.read_csv(target)) == 3 and not list(tmp_path.glob("*.bak"))

    found = read_emissions(target)
    assert len(found.runs) == 3 and not found.skipped
    capsys.readouterr()
    main(["whatif", str(target), "--trace", str(carbon_trace("GB_2022_hourly.csv")), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["runs"] == 3 and doc["summary"]["energy_kwh"] == pytest.approx(0.3)


def test_an_existing_file_keeps_its_own_columns(tmp_path: Path) -> None:
    target = tmp_path / "old.csv"
    with target.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerow(V2_COLUMNS)
    run_job(tmp_path, target)
    rows = list(csv.DictReader(target.open(encoding="utf-8", newline="")))
    assert len(rows) == 2 and list(rows[0]) == list(V2_COLUMNS) and rows[0]["country_iso_code"] == "GBR"
    assert [r.row for r in read_emissions(target).runs] == [2, 3]


def test_a_path_that_cannot_take_the_row_fails_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--codecarbon-csv .*: is a folder"):
        with Session(ThresholdPolicy(200), devices=False, progress=False, codecarbon_csv=tmp_path):
            pass
    with pytest.raises(ConfigError, match="codecarbon_csv: must not be empty"):
        Session(codecarbon_csv=" ")


def test_a_failed_write_at_the_end_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "gone" / "emissions.csv"
    target.parent.mkdir()
    with Session(ThresholdPolicy(200), devices=False, progress=False, codecarbon_csv=target) as session:
        target.parent.rmdir()
        target.parent.write_text("now a file")  # the folder went away under the job
        session.step()
    err = capsys.readouterr().err
    assert f"greentrain: warning: --codecarbon-csv {target}: row not written" in err and session.finished is not None


def test_greentrain_run_writes_the_row(tmp_path: Path) -> None:
    target = tmp_path / "emissions.csv"
    with pytest.raises(SystemExit) as done:
        main(["run", "--codecarbon-csv", str(target), "--zone", "GB", "--provider", "static", "--",
              sys.executable, "-c", "import time; time.sleep(0.3)"])
    assert done.value.code == 0
    [run] = read_emissions(target).runs
    assert run.country_iso_code == "GBR" and run.energy_kwh > 0 and run.emissions_kg is not None
