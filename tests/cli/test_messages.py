"""What greentrain says on the terminal: a plan and a summary for `run`, a late job's status, one time per
message, tables within 80 columns, the year a replayed trace maps 'now' to, and no 'resuming' after a start
that never began."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.engine import Collaborators, DeadlineGuard, Progress
from greentrain.policies import load_policy
from greentrain.cli import main
from greentrain.exitcodes import DEADLINE_MISSED_EXIT_CODE

pytestmark = pytest.mark.timeout(120)

PY = sys.executable
GB_TRACE = Path(__file__).resolve().parents[2] / "greentrain" / "data" / "carbon" / "GB_2022_hourly.csv"
_TIME = re.compile(r"\d\d:\d\d")


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "80"}
    return subprocess.run([PY, "-m", "greentrain", *args], capture_output=True, text=True, timeout=100, env=env)


def _run_late(policy: str) -> subprocess.CompletedProcess:
    """A command estimated at 30 simulated minutes that takes 2 real s = 2 simulated hours, deadline +1 h."""
    return _run(["run", "--no-measure", "--replay-speedup", "3600", "--replay-start", "2022-03-01T00:00Z",
                 "--provider", f"csv:{GB_TRACE}", "--zone", "GB", "--policy", "run-now", "--interval-s", "0.05",
                 "--deadline", "+1", "--estimate-hours", "0.5", "--deadline-policy", policy, "--",
                 PY, "-c", "import time; time.sleep(2)"])


def test_run_that_finishes_late_says_so_and_exits_3() -> None:
    proc = _run_late("strict")
    assert proc.returncode == DEADLINE_MISSED_EXIT_CODE, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("greentrain: plan: policy run-now, carbon GB from a replayed trace "
                               "(GB_2022_hourly.csv)"), lines
    assert "~30 min of work, deadline 2022-03-01 01:00 UTC (simulated), pauses by suspend" in lines[0]
    warnings = [line for line in lines if line.startswith("greentrain: WARNING:")]
    assert len(warnings) == 1 and "deadline 2022-03-01 01:00 UTC (simulated)" in warnings[0], lines
    assert any(line.startswith("greentrain: DEADLINE MISSED: finished ") for line in lines)
    done = lines[-1]
    assert done.startswith("greentrain: done: exit status 0, energy not measured, emissions unknown")
    assert "deadline 2022-03-01 01:00 UTC (simulated) MISSED by" in done
    assert "Traceback" not in proc.stderr


def test_best_effort_reports_the_miss_and_keeps_the_commands_status() -> None:
    proc = _run_late("best-effort")
    assert proc.returncode == 0, proc.stderr
    assert "DEADLINE MISSED" in proc.stderr and ") MISSED by" in proc.stderr


def test_run_prints_a_plan_and_a_summary_on_success() -> None:
    proc = _run(["run", "--no-measure", "--policy", "run-now", "--interval-s", "0.05", "--",
                 PY, "-c", "print('child output')"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "child output\n", "stdout belongs to the command"
    lines = proc.stderr.splitlines()
    assert lines[0] == ("greentrain: plan: policy run-now, no carbon signal (energy only; runs now), "
                        "no deadline, pauses by suspend")
    assert lines[-1] == ("greentrain: done: exit status 0, energy not measured, emissions unknown (no energy measured), "
                         "no deadline")


def test_delayed_start_announces_one_time_the_planned_resume(capsys: pytest.CaptureFixture[str]) -> None:
    """forecast-optimal re-looks every trace hour; the announcement names the plan's resume, once."""
    from greentrain.clock import FrozenClock
    from greentrain.engine import Engine
    from greentrain.signals import SignalChain, make_provider

    origin = datetime(2022, 10, 10, 5, tzinfo=UTC)  # GB morning peak: cleaner from the late morning
    clock = FrozenClock(origin)
    chain = SignalChain([make_provider(f"csv:{GB_TRACE}", clock=clock)], zone="GB", clock=clock)
    engine = Engine(load_policy("forecast-optimal"),
                    Collaborators(clock=clock, signals=chain),
                    progress=Progress(steps_total=100, step_time_s=60.0),
                    deadline=DeadlineGuard(origin + timedelta(hours=20), simulated=True),
                    countdown=False)
    decision = engine.begin()
    assert decision.until is not None and decision.plan
    planned = min(start for start, _ in decision.plan if start > origin)
    assert planned > decision.until, "the policy's next look is earlier than the planned resume"
    engine.waiter.retarget(decision.until)
    engine.waiter.announce(decision.reason)
    engine.close()
    line = [x for x in capsys.readouterr().err.splitlines() if "delaying start" in x][0]
    assert len(_TIME.findall(line)) == 1, line
    assert f"until {planned:%Y-%m-%d %H:%M} UTC (simulated) (forecast-optimal: " in line


def test_forecast_table_fits_80_columns_and_names_the_trace_date(capfd: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    main(["carbon", "forecast", "--zone", "GB", "--provider", f"csv:{GB_TRACE}", "--hours", "6"])
    out, err = capfd.readouterr()
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert "…" not in out and "gCO2eq/kWh" in out and "provider: csv" in out
    trace_year_now = datetime.now(UTC).replace(year=2022)
    assert "greentrain: replaying trace GB_2022_hourly.csv: now is read as 2022-" in err
    assert f"2022-{trace_year_now:%m-%d}" in err


def test_doctor_gpu_table_keeps_whole_names_at_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import greentrain.device.nvml as nvml_module
    from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

    fake = FakeNVML([FakeNVMLDevice("a40"), FakeNVMLDevice("v100", energy_counter=False, privileged=False)])
    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: fake)
    monkeypatch.setenv("GREENTRAIN_RAPL_ROOT", str(tmp_path / "none"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    main(["doctor"])
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert "NVIDIA A40" in out and "Tesla V100-PCIE-32GB" in out  # whole names, not "NVI"
    monkeypatch.setenv("COLUMNS", "250")
    main(["doctor"])
    assert "┃ GPU" in capsys.readouterr().out, "a wide terminal still gets the table"


def test_demo_with_a_busy_port_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        proc = _run(["demo", "--out", str(out), "--metrics-port", str(busy.getsockname()[1]), "--no-progress"])
    assert proc.returncode == 2, proc.stderr
    assert "--metrics-port" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_a_demo_start_that_fails_before_its_first_step_leaves_no_job_to_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import greentrain.demo.runner as runner

    out = tmp_path / "demo"

    def fail_to_start(self: runner.DemoRunner) -> str:
        raise OSError(98, "Address already in use")  # what a lost race for the metrics port raises

    monkeypatch.setattr(runner.DemoRunner, "run", fail_to_start)
    monkeypatch.setattr(runner, "measure_step_time_s", lambda: 0.02)
    with pytest.raises(OSError):
        main(["demo", "--out", str(out), "--metrics-port", "0", "--no-progress", "--no-report"])
    assert not out.exists(), list(out.iterdir())
    capsys.readouterr()
    # A folder the user already had stays, emptied of what the failed start wrote.
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(OSError):
        main(["demo", "--out", str(out), "--metrics-port", "0", "--no-progress", "--no-report"])
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    monkeypatch.undo()
    monkeypatch.setattr(runner.DemoRunner, "run", fail_to_start)
    monkeypatch.setattr(runner, "measure_step_time_s", lambda: 0.02)
    with pytest.raises(OSError):
        main(["demo", "--out", str(out), "--metrics-port", "0", "--no-progress", "--no-report"])
    assert "resuming" not in capsys.readouterr().out


def test_a_busy_machine_no_longer_sizes_the_demo_past_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """1 s per step at x480 once made 1 h of work 2.7 simulated hours; each step is now a fixed share of the
    work, so the job is the hour it was sized, and a deadline shorter than the work is refused by its flag."""
    import greentrain.cli.demo as demo_cli
    from greentrain.demo.scenario import Scenario

    monkeypatch.setattr("greentrain.demo.runner.measure_step_time_s", lambda: 1.0)
    scenario = Scenario(zone="GB", trace=tmp_path / "t.csv", start=datetime(2022, 3, 14, tzinfo=UTC), work_h=1.0,
                        deadline_h=2.0, speedup=480.0)
    state = demo_cli._new_state(scenario, "carbon-aware", 0.0, None, "strict", lambda _m: None)
    assert state.steps_total * state.step_job_s == pytest.approx(3600.0)
    out = tmp_path / "demo"
    with pytest.raises(SystemExit) as info:
        main(["demo", "--out", str(out), "--metrics-port", "0", "--deadline", "+2", "--work-hours", "3",
              "--no-progress", "--no-report"])
    assert info.value.code == 2
    assert "greentrain: error: --deadline: 2022-03-14 02:00 UTC is only 2 h after the simulated start" \
        in capsys.readouterr().err
    assert not out.exists()
