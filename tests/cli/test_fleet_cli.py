"""``greentrain fleet simulate``: the JSON contract on a hand-made trace, and bad input as one line each, exit 2."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from test_simulate import T0, write_trace

from greentrain.cli import main

pytestmark = pytest.mark.timeout(120)

JOBS_HEADER = "id,submit,gpus,work_hours,deadline_hours\n"


def run_fleet(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(["fleet", "simulate", *args])
        raise SystemExit(0)
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def test_json_has_every_job_schedule_and_the_summary(tmp_path: Path, capsys) -> None:
    # Dirty now, clean from hour 4 to 8: the plan fills the clean hours with both jobs, which fit side by side.
    trace = write_trace(tmp_path, [400.0] * 4 + [50.0] * 4 + [400.0] * 40)
    submit = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS_HEADER + f"a,{submit},2,2,12\nb,{submit},2,3,12\n")
    code, out, err = run_fleet(capsys, "--jobs", str(jobs), "--trace", str(trace), "--capacity-gpus", "4",
                               "--power-kw-per-gpu", "0.5", "--forecast", "perfect", "--json")
    assert code == 0, err
    report = json.loads(out)
    by_id = {j["id"]: j for j in report["jobs"]}
    assert set(by_id) == {"a", "b"} and all(j["deadline_met"] for j in by_id.values())
    assert by_id["a"]["schedule"] == [{"start": "2022-03-01T04:00:00Z", "end": "2022-03-01T06:00:00Z", "gpus": 2,
                                         "partition": "default"}]
    assert by_id["b"]["emissions_g"] == pytest.approx(2 * 0.5 * 3 * 50.0)
    summary = report["summary"]
    assert summary["policy"] == "carbon-aware" and summary["late_jobs"] == 0
    assert summary["peak_gpus_in_use"] == 4 and not summary["capacity_exceeded"]
    assert summary["emissions_g"] == pytest.approx(sum(j["emissions_g"] for j in report["jobs"]))
    baselines = summary["baselines"]
    assert set(baselines) == {"run-now", "per-job", "offline-bound"}
    assert baselines["run-now"]["emissions_g"] == pytest.approx(0.5 * (2 * 2 + 2 * 3) * 400.0)
    assert summary["fraction_of_bound_saving"] == pytest.approx(1.0, abs=1e-6)


def test_a_trace_that_starts_with_the_jobs_says_the_forecast_has_no_history(tmp_path: Path, capsys) -> None:
    trace = write_trace(tmp_path, [400.0] * 4 + [50.0] * 4 + [400.0] * 40)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS_HEADER + f"a,{T0.strftime('%Y-%m-%dT%H:%M:%SZ')},2,2,12\n")
    args = ("--jobs", str(jobs), "--trace", str(trace), "--capacity-gpus", "4", "--json")
    code, out, err = run_fleet(capsys, *args)
    assert code == 0, err
    notes = json.loads(out)["summary"]["notes"]
    assert len(notes) == 1 and "holds 0 h before" in notes[0] and f"greentrain: note: {notes[0]}" in err
    code, out, err = run_fleet(capsys, *args, "--forecast", "perfect")  # nothing is forecast: nothing to say
    assert code == 0 and json.loads(out)["summary"]["notes"] == [] and "note" not in err


def test_bad_jobs_and_flags_are_one_line_each_exit_2(tmp_path: Path, capsys) -> None:
    trace = write_trace(tmp_path, [100.0] * 48)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS_HEADER + "a,2022-03-01T00:00Z,2,1,10\na,2022-03-01T00:00Z,2,1,10\n"
                    "b,2022-03-01T00:00Z,9,1,10\n")
    code, out, err = run_fleet(capsys, "--jobs", str(jobs), "--trace", str(trace), "--capacity-gpus", "8")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "duplicate id 'a'" in err and "wider than the cluster (8 GPUs)" in err
    assert "Traceback" not in err
    code, _, err = run_fleet(capsys, "--jobs", str(jobs), "--trace", str(trace), "--capacity-gpus", "0",
                             "--power-kw-per-gpu", "-1")
    assert code == 2 and "--capacity-gpus" in err and "--power-kw-per-gpu" in err and "Traceback" not in err


def test_a_causal_replay_says_how_far_off_its_forecast_was_a_day_ahead(tmp_path: Path, capsys) -> None:
    # Three days of history with a daily cycle, then the jobs: the forecasts the plans were made on are
    # scored against the trace, in the JSON and in one line of the table's output.
    cycle = [300.0 + 150.0 * np.sin(2 * np.pi * h / 24) for h in range(24)]
    trace = write_trace(tmp_path, cycle * 7)
    submit = (T0 + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS_HEADER + f"a,{submit},2,2,30\nb,{submit},2,3,30\n")
    args = ("--jobs", str(jobs), "--trace", str(trace), "--capacity-gpus", "4")
    code, out, err = run_fleet(capsys, *args, "--json")
    assert code == 0, err
    forecast = json.loads(out)["summary"]["forecast"]
    assert forecast["kind"] == "causal" and forecast["day_ahead_forecasts"] > 0
    assert forecast["day_ahead_mae_g_per_kwh"] >= abs(forecast["day_ahead_bias_g_per_kwh"])
    assert 150 <= forecast["day_ahead_actual_mean_g_per_kwh"] <= 450
    code, out, err = run_fleet(capsys, *args)
    assert code == 0, err
    assert f"off by {forecast['day_ahead_mae_g_per_kwh']:g} g/kWh on average a day ahead" in " ".join(out.split())
    code, out, err = run_fleet(capsys, *args, "--forecast", "perfect", "--json")
    assert json.loads(out)["summary"]["forecast"] == {"kind": "perfect"}
    code, out, err = run_fleet(capsys, *args, "--forecast", "perfect")
    flat = " ".join(out.split())
    assert "less than FIFO run-now" in flat and "forecast:" not in flat


def write_exact_archive(tmp_path: Path, values: list[float], ahead_h: int = 47) -> Path:
    """A provider that was always right: every hour, the trace's next ``ahead_h`` hours as issued then."""
    rows = ["issued_at,target_time,intensity_g_per_kwh"]
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    for issued in range(len(values)):
        for target in range(issued + 1, min(len(values), issued + 1 + ahead_h)):
            rows.append(f"{(T0 + timedelta(hours=issued)).strftime(stamp)},"
                        f"{(T0 + timedelta(hours=target)).strftime(stamp)},{values[target]}")
    path = tmp_path / "archive.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_recorded_provider_forecast_replays_as_issued_in_the_fleet(tmp_path: Path, capsys) -> None:
    values = [400.0] * 4 + [50.0] * 4 + [400.0] * 40
    trace, archive = write_trace(tmp_path, values), write_exact_archive(tmp_path, values)
    submit = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS_HEADER + f"a,{submit},2,2,12\nb,{submit},2,3,12\n")
    args = ["--jobs", str(jobs), "--trace", str(trace), "--capacity-gpus", "4", "--power-kw-per-gpu", "0.5"]
    code, out, err = run_fleet(capsys, *args, "--json")  # greentrain's own: no history, so it runs at once
    assert code == 0, err
    assert json.loads(out)["summary"]["fraction_of_bound_saving"] == pytest.approx(0.0, abs=1e-6)
    code, out, err = run_fleet(capsys, *args, "--forecast-archive", str(archive), "--forecast-blend", "latest",
                               "--json")
    assert code == 0, err
    report = json.loads(out)
    summary = report["summary"]
    assert summary["fraction_of_bound_saving"] == pytest.approx(1.0, abs=1e-6)  # the exact provider's plan
    assert summary["forecast"]["kind"] == "archive (latest) + causal"
    archived = summary["forecast_archive"]
    assert archived["blend"] == "latest" and archived["fallback_hours"] == 0
    assert report["input"]["forecast_archive"] == str(archive)
    code, out, _ = run_fleet(capsys, *args, "--forecast-archive", str(archive))
    assert code == 0 and "forecasts as issued:" in out and f"from {archive}" in " ".join(out.split())
    code, _, err = run_fleet(capsys, *args, "--forecast-archive", str(archive), "--forecast", "perfect")
    assert code == 2 and err.strip().splitlines()[-1].endswith(
        "--forecast-archive: replays forecasts as issued; it cannot be combined with perfect foresight "
        "(--forecaster perfect, --forecast perfect)")
    code, _, err = run_fleet(capsys, *args, "--forecast-archive", str(tmp_path / "none.csv"))
    assert code == 2 and "--forecast-archive:" in err and "no such file" in err
