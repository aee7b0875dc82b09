"""``greentrain simulate --scaling-profile FILE --replicas N``: replicas in the JSON, baselines, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_simulate import run_cli, write_trace

pytestmark = pytest.mark.timeout(120)

DATA = Path(__file__).resolve().parents[2] / "greentrain" / "data" / "scaling"


def profile(tmp_path: Path, text: str = "replicas,throughput,power_w\n1,10,100\n2,20,200\n") -> Path:
    path = tmp_path / "profile.csv"
    path.write_text(text, encoding="utf-8")
    return path


BASE = ["--start", "2022-03-01T00:00Z", "--deadline-hours", "3", "--resume-overhead-min", "5",
        "--forecaster", "perfect", "--json"]


def test_schedule_segments_carry_replicas_and_scaling_baselines(tmp_path, capsys):
    # The hand case of tests/policies: 2 h at 1 replica in [100, 500, 500]; 2 replicas in hour 0 do it all.
    trace = write_trace(tmp_path, [100, 500, 500, 500])
    code, out, _ = run_cli(capsys, "--trace", str(trace), "--scaling-profile", str(profile(tmp_path)),
                           "--replicas", "1", "--work-hours", "2", *BASE)
    assert code == 0
    doc = json.loads(out)
    [run] = doc["runs"]
    assert run["schedule"] == [{"start": "2022-03-01T00:00:00Z", "end": "2022-03-01T01:00:00Z", "replicas": 2}]
    assert run["emissions_g"] == pytest.approx(20.0) and run["rescales"] == 0
    assert run["baselines"]["run_now"]["emissions_g"] == pytest.approx(60.0)
    assert run["baselines"]["timing_only"]["emissions_g"] == pytest.approx(60.0)
    assert run["baselines"]["oracle"]["emissions_g"] == pytest.approx(20.0)
    assert run["baselines"]["oracle"]["schedule"][0]["replicas"] == 2
    summary = doc["summary"]
    assert summary["fraction_of_oracle_saving"] == pytest.approx(1.0)
    assert summary["timing_only_saving_vs_run_now"] == pytest.approx(0.0)
    assert summary["replicas"] == 1 and summary["idle_power_kw"] == 0.0  # unused replicas are released


def test_real_profile_with_causal_forecasts_meets_every_deadline(tmp_path, capsys, carbon_trace):
    code, out, _ = run_cli(capsys, "--trace", str(carbon_trace("DE-LU_2022_hourly.csv")), "--scaling-profile",
                           str(DATA / "nbody10k.csv"), "--replicas", "4", "--work-hours", "8",
                           "--deadline-hours", "24", "--starts", "2022-02-01T00Z,2022-02-10T00Z,72", "--json")
    assert code == 0
    summary = json.loads(out)["summary"]
    assert summary["deadlines_missed"] == 0 and summary["runs"] == 4
    # nbody scales poorly: fewer replicas do the work for much less energy, whatever the forecast says.
    assert summary["saving_vs_run_now"] > summary["timing_only_saving_vs_run_now"] > 0
    assert summary["fraction_of_oracle_saving"] <= 1.0 + 1e-9


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replicas", "3"], "--replicas: 3 is not a count in"),
        ([], "--scaling-profile FILE and --replicas N go together"),
        (["--replicas", "1", "--max-replicas", "0"], "--max-replicas: must be >= min_replicas (1)"),
        (["--replicas", "1", "--profile", "v100", "--workload", "x/y"], "not with --scaling-profile"),
    ],
)
def test_bad_scaling_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    trace = write_trace(tmp_path, [5] * 24)
    code, _, err = run_cli(capsys, "--trace", str(trace), "--scaling-profile", str(profile(tmp_path)),
                           "--work-hours", "2", *BASE, *args)
    assert code == 2 and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_replicas_without_profile_and_bad_profile_row(tmp_path, capsys):
    trace = write_trace(tmp_path, [5] * 24)
    code, _, err = run_cli(capsys, "--trace", str(trace), "--replicas", "2", "--work-hours", "2", *BASE)
    assert code == 2 and "--scaling-profile FILE and --replicas N go together" in err
    bad = profile(tmp_path, "replicas,throughput,power_w\n1,10,100\n2,nan,200\n")
    code, _, err = run_cli(capsys, "--trace", str(trace), "--scaling-profile", str(bad), "--replicas", "1",
                           "--work-hours", "2", *BASE)
    assert code == 2 and f"{bad}: row 3: throughput must be a finite number > 0" in err
    assert err.count("\n") == 1
