"""``greentrain submit`` at the command line: dry-run plans, and one-line errors (exit 2) for bad input."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.cli import main

HEADER = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
          "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
          "Data Estimated,Data Estimation Method")


def trace(path: Path, zone: str, values: list[float]) -> str:
    start = datetime(2022, 6, 1, tzinfo=UTC)
    rows = [HEADER] + [f"{(start + timedelta(hours=i)):%Y-%m-%d %H:%M:%S},X,{zone},{zone},{v},{v},0,0,t,false,"
                       for i, v in enumerate(values)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["submit", *args])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


REPLAY = ["--replay-start", "2022-06-01T00:00Z"]


@pytest.mark.timeout(30)
def test_dry_run_prints_the_plan_and_the_exact_sbatch_arguments(tmp_path: Path, capsys) -> None:
    gb = trace(tmp_path / "gb.csv", "GB", [300, 280, 90, 95, 300] + [300] * 40)
    code, out, err = run(capsys, "--zone", "GB", "--deadline", "+20", "--dry-run", "--replay-trace", gb, *REPLAY,
                         "--", "-p", "gpu", "--time=2:00:00", "--comment", "my run", "train.sh", "--lr", "3e-4")
    assert code == 0, err
    assert "forecast mean 92 g/kWh" in out  # hours 2-3 of the trace
    assert re.search(r"68% below starting now \(290 g/kWh\)", out)
    sbatch = out.splitlines()[-1]
    assert sbatch.startswith("dry run: sbatch -p gpu --time=2:00:00 --comment 'my run' --begin=")
    assert "'--comment=my run greentrain(zone=GB;deadline=" in sbatch and "estimate_h=2)'" in sbatch
    assert sbatch.endswith("train.sh --lr 3e-4")  # the script's own arguments stay after it


@pytest.mark.timeout(30)
def test_location_aware_dry_run_picks_the_cleaner_partition(tmp_path: Path, capsys) -> None:
    gb = trace(tmp_path / "gb.csv", "GB", [250] * 48)
    no = trace(tmp_path / "no.csv", "NO", [30] * 48)
    code, out, err = run(capsys, "--place", "west:uk=GB", "--place", "north:oslo=NO", "--estimate-hours", "3",
                         "--power-kw", "2", "--dry-run", "--replay-trace", gb, "--replay-trace", no, *REPLAY,
                         "--", "job.sh")
    assert code == 0, err
    assert "plan: north:oslo (NO)" in out and "~180 gCO2e" in out  # 30 g/kWh x 2 kW x 3 h
    assert "--clusters=north --partition=oslo" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dry-run", "--", "job.sh"], "give --zone ZONE or one or more --place"),
        (["--place", "=GB", "--dry-run", "--", "job.sh"], "--place: '=GB' is not [CLUSTER:]PARTITION=ZONE"),
        (["--zone", "GB", "--deadline", "+1", "--estimate-hours", "4", "--dry-run", "--", "job.sh"],
         "less than the 4.00 h estimate"),
        (["--zone", "GB", "--estimate-hours", "1", "--dry-run", "--", "--begin=now", "job.sh"],
         "'--begin=now' is set by greentrain submit"),
        (["--zone", "GB", "--estimate-hours", "1", "--dry-run", "--", "-p", "gpu"], "name the batch script"),
        (["--zone", "GB", "--dry-run", "--", "job.sh"], "--estimate-hours: give the expected running time"),
        (["--zone", "GB", "--dry-run", "--", "-t", "soon", "job.sh"], "--time: 'soon' is not a Slurm time limit"),
        (["--zone", "DE", "--estimate-hours", "1", "--dry-run", "--", "job.sh"], "zone 'DE': no --replay-trace"),
        (["--zone", "GB", "--deadline", "tomorrow", "--dry-run", "--", "job.sh"], "'tomorrow' is not ISO-8601"),
    ],
)
@pytest.mark.timeout(30)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    gb = trace(tmp_path / "gb.csv", "GB", [200] * 48)
    dash = args.index("--")
    code, out, err = run(capsys, *args[:dash], "--replay-trace", gb, *REPLAY, *args[dash:])
    assert code == 2
    assert message in err
    assert "Traceback" not in err


@pytest.mark.timeout(30)
def test_replay_trace_needs_a_start_and_a_readable_file(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, "--zone", "GB", "--replay-trace", trace(tmp_path / "gb.csv", "GB", [1] * 5),
                       "--dry-run", "--", "job.sh")
    assert code == 2 and "--replay-start" in err
    code, _, err = run(capsys, "--zone", "GB", "--replay-trace", str(tmp_path / "missing.csv"), *REPLAY,
                       "--dry-run", "--", "job.sh")
    assert code == 2 and "missing.csv: cannot read trace" in err


@pytest.mark.timeout(30)
def test_missing_sbatch_is_a_clear_error(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm here
    gb = trace(tmp_path / "gb.csv", "GB", [200] * 48)
    code, _, err = run(capsys, "--zone", "GB", "--estimate-hours", "1", "--replay-trace", gb, *REPLAY, "--", "job.sh")
    assert code == 2
    assert err.strip() == "greentrain: error: sbatch: not found on PATH; run this on a Slurm login node"


@pytest.mark.timeout(30)
def test_reschedule_rejects_a_malformed_job_id_without_calling_slurm(tmp_path: Path, capsys) -> None:
    gb = trace(tmp_path / "gb.csv", "GB", [200] * 48)
    code, _, err = run(capsys, "--reschedule", "42;rm -rf /", "--replay-trace", gb, *REPLAY)
    assert code == 2 and "is not a Slurm job id" in err


@pytest.mark.timeout(30)
def test_unavailable_carbon_signal_warns_and_plans_to_start_now(capsys, monkeypatch) -> None:
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)  # no token: fails before any network call
    code, out, err = run(capsys, "--zone", "GB", "--provider", "electricitymaps", "--estimate-hours", "2",
                         "--dry-run", "--", "job.sh")
    assert code == 0
    assert "greentrain: warning: carbon signal for GB unavailable" in err and "no API token" in err
    assert "forecast mean unknown" in out
