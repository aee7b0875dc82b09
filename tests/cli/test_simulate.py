"""``greentrain simulate``: JSON contract, hand-checked numbers, one-line errors with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.cli import main

pytestmark = pytest.mark.timeout(120)

HEADER = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
          "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
          "Data Estimated,Data Estimation Method")
T0 = datetime(2022, 3, 1, tzinfo=UTC)


def write_trace(tmp_path: Path, values, lca=None) -> Path:
    rows = [HEADER]
    for i, value in enumerate(values):
        when = (T0 + timedelta(hours=i)).strftime("%Y-%m-%d %H:%M:%S")
        rows.append(f"{when},X,X,XX,{value},{(lca or values)[i]},0,0,test,false,")
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def run_cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(["simulate", *args])
        raise SystemExit(0)
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


BASE = ["--start", "2022-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "5",
        "--resume-overhead-min", "30", "--forecaster", "perfect", "--json"]


def test_json_matches_hand_computed_case(tmp_path, capsys):
    trace = write_trace(tmp_path, [5, 1, 9, 1, 5, 2, 2, 2])
    code, out, _ = run_cli(capsys, "--trace", str(trace), "--policy", "forecast-optimal", *BASE)
    assert code == 0
    doc = json.loads(out)
    [run] = doc["runs"]
    assert run["start"] == "2022-03-01T00:00:00Z"
    assert run["schedule"] == [
        {"start": "2022-03-01T01:00:00Z", "end": "2022-03-01T02:00:00Z"},
        {"start": "2022-03-01T03:00:00Z", "end": "2022-03-01T04:30:00Z"},
    ]
    assert run["finished_at"] == "2022-03-01T04:30:00Z" and run["deadline_met"] is True
    # 1 kW default; held idle 0.12 kW (the default ratio) through hour 2 at 9 g/kWh: 0.12 kWh, 1.08 g.
    assert run["emissions_g"] == pytest.approx(4.5 + 1.08)
    assert run["waiting_energy_kwh"] == pytest.approx(0.12)
    assert run["energy_kwh"] == pytest.approx(2.5 + 0.12)  # 2 h of work + 30 min resume overhead + waiting
    assert run["baselines"]["run_now"]["emissions_g"] == pytest.approx(6.0)
    assert run["baselines"]["run_now"]["waiting_energy_kwh"] == 0.0
    assert run["baselines"]["best_window"]["emissions_g"] == pytest.approx(6.0)
    assert run["baselines"]["oracle"]["emissions_g"] == pytest.approx(5.58)
    summary = doc["summary"]
    assert summary["runs"] == 1 and summary["deadlines_missed"] == 0
    assert summary["fraction_of_oracle_saving"] == pytest.approx(1.0)
    assert summary["idle_power_kw"] == pytest.approx(0.12) and summary["runs_worse_than_run_now"] == 0


def test_idle_power_released_and_net_negative_pause(tmp_path, capsys):
    trace = write_trace(tmp_path, [5, 1, 9, 1, 5, 2, 2, 2])
    code, out, _ = run_cli(capsys, "--trace", str(trace), "--policy", "forecast-optimal", "--idle-power-kw", "0",
                           *BASE)
    run = json.loads(out)["runs"][0]
    assert code == 0 and run["emissions_g"] == pytest.approx(4.5) and run["waiting_energy_kwh"] == 0.0
    # Held at 0.5 kW the pause through hour 2 costs 4.5 g: 4.5 + 4.5 = 9 > run-now's 6. The idle-aware
    # oracle instead runs hours 0-1 (5 + 1 = 6 g; delaying the start to hours 3-4 also costs 6, later).
    code, out, _ = run_cli(capsys, "--trace", str(trace), "--policy", "forecast-optimal", "--idle-power-kw",
                           "0.5", *BASE)
    run = json.loads(out)["runs"][0]
    assert run["baselines"]["oracle"]["emissions_g"] == pytest.approx(6.0)
    assert run["emissions_g"] == pytest.approx(6.0) and run["waiting_energy_kwh"] == 0.0


@pytest.mark.parametrize("value", ["-0.1", "abc", "nan"])
def test_bad_idle_power_is_one_line_exit_2(tmp_path, capsys, value):
    trace = write_trace(tmp_path, [5, 1, 9, 1, 5, 2, 2, 2])
    code, out, err = run_cli(capsys, "--trace", str(trace), "--idle-power-kw", value, *BASE)
    assert code == 2 and out == ""
    assert "--idle-power-kw" in err and len(err.strip().splitlines()) == 1


def test_power_kw_and_lca_column(tmp_path, capsys):
    trace = write_trace(tmp_path, [5, 1, 9, 1, 5, 2, 2, 2], lca=[50, 10, 90, 10, 50, 20, 20, 20])
    code, out, _ = run_cli(capsys, "--trace", str(trace), "--column", "lca", "--power-kw", "2",
                           "--policy", "run-now", *BASE)
    assert code == 0
    run = json.loads(out)["runs"][0]
    assert run["emissions_g"] == pytest.approx(2 * (50 + 10))
    assert run["schedule"] == [{"start": "2022-03-01T00:00:00Z", "end": "2022-03-01T02:00:00Z"}]


def test_many_starts_and_profile_adds_power_limits(tmp_path, capsys):
    trace = write_trace(tmp_path, [300, 100, 50, 400, 20, 30, 500, 60] * 4)
    args = ["--trace", str(trace), "--starts", "2022-03-01T00:00Z,2022-03-02T00:00Z,12", "--work-hours", "3",
            "--deadline-hours", "6", "--profile", "v100", "--workload", "imagenet/resnet50", "--gpus", "2",
            "--forecaster", "perfect", "--json"]
    code, out, _ = run_cli(capsys, *args)
    doc = json.loads(out)
    assert code == 0 and len(doc["runs"]) == 3
    for run in doc["runs"]:
        assert run["deadline_met"]
        assert all(isinstance(i["power_limit_w"], float) for i in run["schedule"])
        assert run["emissions_g"] <= run["baselines"]["run_now"]["emissions_g"] + 1e-6
        assert run["baselines"]["oracle"]["emissions_g"] <= run["baselines"]["best_window"]["emissions_g"] + 1e-6
    assert doc["runs"][1]["start"] == "2022-03-01T12:00:00Z"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--start", "2022-03-01T00:00", "--work-hours", "2", "--deadline-hours", "5"], "--start: naive datetime"),
        (["--start", "2022-03-01T00:00Z", "--work-hours", "6", "--deadline-hours", "5"], "shorter than the work"),
        (["--start", "2022-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "0"], "deadline in the past"),
        (["--start", "2022-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "30"], "too short for"),
        (["--start", "2022-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "5", "--policy", "nope"],
         "unknown policy or preset 'nope'"),
        (["--start", "2022-03-01T00:30Z", "--work-hours", "2", "--deadline-hours", "5"], "not the start of"),
        (["--start", "2023-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "5"], "outside"),
        (["--starts", "2022-03-01T00:00Z,2022-03-01T05:00Z", "--work-hours", "2", "--deadline-hours", "5"],
         "FROM,TO,EVERY_HOURS"),
        (["--work-hours", "2", "--deadline-hours", "5"], "exactly one of --start"),
        (["--start", "2022-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "5", "--profile", "h900",
          "--workload", "x/y"], "cannot read GPU profile"),
        (["--start", "2022-03-01T00:00Z", "--work-hours", "2", "--deadline-hours", "5", "--profile", "v100",
          "--workload", "mnist/lenet"], "--workload: 'mnist/lenet'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    trace = write_trace(tmp_path, [5] * 24)
    code, _, err = run_cli(capsys, "--trace", str(trace), *args)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_malformed_policy_file(tmp_path, capsys):
    trace = write_trace(tmp_path, [5] * 24)
    bad = tmp_path / "bad.toml"
    bad.write_text("[policy\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "--trace", str(trace), "--policy", str(bad), *BASE)
    assert code == 2 and "invalid TOML" in err and str(bad) in err


def test_best_effort_deadline_warns_and_runs_now(tmp_path, capsys):
    trace = write_trace(tmp_path, [5, 1, 9, 1, 5, 2, 2, 2])
    code, out, err = run_cli(capsys, "--trace", str(trace), "--start", "2022-03-01T00:00Z", "--work-hours", "3",
                             "--deadline-hours", "2", "--deadline-policy", "best-effort", "--json")
    assert code == 0 and "warning" in err and "best-effort" in err
    run = json.loads(out)["runs"][0]
    assert run["deadline_met"] is False
    assert run["emissions_g"] == pytest.approx(5 + 1 + 9)
    assert json.loads(out)["summary"]["policy"] == "run-now"


def test_real_command_with_default_forecaster_and_table(tmp_path):
    trace = write_trace(tmp_path, ([300, 100, 50, 400, 20, 30, 500, 60] * 3) * 4)
    cmd = [sys.executable, "-m", "greentrain", "simulate", "--trace", str(trace), "--start",
           "2022-03-03T00:00Z", "--work-hours", "4", "--deadline-hours", "12"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=100, check=False, env={"OMP_NUM_THREADS": "1",
                          "PATH": "/usr/bin:/bin", "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    assert "fraction of oracle saving" in done.stdout and "deadlines missed: 0/1" in done.stdout
    # Two days of trace before the start: a daily profile, not the forecaster's full skill, and it says so.
    assert "greentrain: note: the trace holds 48 h before 2022-03-03T00:00Z" in done.stderr


def test_policy_file_and_seasonal_forecaster(tmp_path, capsys):
    trace = write_trace(tmp_path, [300, 100, 50, 400, 20, 30, 500, 60] * 9)
    policy = tmp_path / "mine.toml"
    policy.write_text('[policy]\nkind = "threshold"\nthreshold_g_per_kwh = 60\n', encoding="utf-8")
    code, out, _ = run_cli(capsys, "--trace", str(trace), "--start", "2022-03-03T00:00Z", "--work-hours", "2",
                           "--deadline-hours", "8", "--policy", str(policy), "--forecaster", "seasonal-naive",
                           "--json")
    assert code == 0
    doc = json.loads(out)
    [run] = doc["runs"]
    # Runs only in the hours at or below 60 g/kWh (50, 20, 30), pausing the rest, and meets the deadline.
    assert [(i["start"][11:16], i["end"][11:16]) for i in run["schedule"]] == [("02:00", "03:00"),
                                                                              ("04:00", "05:05")]
    assert run["deadline_met"] and run["resumes"] == 1
    assert doc["summary"]["policy"] == "threshold"
    assert doc["summary"]["notes"] == []  # same-hour-yesterday needs no more than the day before


def test_summary_says_how_far_off_the_forecast_was_by_hours_ahead(tmp_path, capsys):
    # Each day 10 g/kWh above the one before, flat within the day: same-hour-yesterday (seasonal-naive) is
    # 10 too low up to a day ahead, 20 up to two days and 30 at three, whatever the decision.
    trace = write_trace(tmp_path, [100 + 10 * (hour // 24) for hour in range(8 * 24)])
    args = ["--trace", str(trace), "--start", "2022-03-03T00:00Z", "--work-hours", "2", "--deadline-hours", "80",
            "--forecaster", "seasonal-naive"]
    code, out, _ = run_cli(capsys, *args, "--json")
    assert code == 0
    forecast = json.loads(out)["summary"]["forecast"]
    assert forecast["kind"] == "seasonal-naive" and forecast["forecasts"] >= 1
    leads = forecast["by_hours_ahead"]
    assert set(leads) == {"1", "6", "12", "24", "48", "72"}
    for ahead, off in (("1", 10), ("6", 10), ("12", 10), ("24", 10), ("48", 20), ("72", 30)):
        assert leads[ahead]["mae_g_per_kwh"] == off and leads[ahead]["bias_g_per_kwh"] == -off, ahead
        # A forecast reaches only to the deadline, so a decision made late in the wait has no 72 h point.
        assert leads[ahead]["pairs"] == forecast["forecasts"] or (ahead == "72" and leads[ahead]["pairs"] >= 1)
    code, out, _ = run_cli(capsys, *args)
    assert code == 0
    assert "forecast (seasonal-naive): MAE 10 g/kWh 1 h ahead, 30 at 72 h (bias -30," in " ".join(out.split())
    code, out, _ = run_cli(capsys, *args[:-1], "perfect", "--json")
    assert json.loads(out)["summary"]["forecast"]["by_hours_ahead"]["72"]["mae_g_per_kwh"] == 0
