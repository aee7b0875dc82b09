"""`greentrain run` summarizes only what happened: a failed command is 'failed (exit N)' with no deadline
verdict and no avoided grams; a command that is not there is one line and 127; Ctrl-C is 130 without a
traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from greentrain.events import read_events
from tests.gt_interrupt import interrupt_after

pytestmark = pytest.mark.timeout(60)

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def greentrain_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "greentrain", "run", *args], capture_output=True, text=True,
                          timeout=50, cwd=cwd, env=ENV)


def test_a_failed_command_is_reported_as_failed(tmp_path: Path) -> None:
    jsonl = tmp_path / "run.jsonl"
    proc = greentrain_run(["--policy", "run-now", "--zone", "GB", "--provider", "static", "--deadline", "+2",
                           "--estimate-hours", "1", "--interval-s", "0.05", "--jsonl", str(jsonl), "--",
                           sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(1)"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    done = [line for line in proc.stderr.splitlines() if line.startswith("greentrain: done:")]
    assert len(done) == 1 and done[0].startswith("greentrain: done: failed (exit 1), energy "), proc.stderr
    assert "met" not in done[0] and "avoided" not in done[0] and "not finished" in done[0]
    summary = next(e for e in read_events(jsonl) if e["event"] == "summary")
    assert summary["finished"] is False
    assert summary["deadline_met"] is None and summary["emissions_avoided_g"] is None


def test_a_command_that_is_not_there_is_one_line_and_127(tmp_path: Path) -> None:
    proc = greentrain_run(["--policy", "run-now", "--zone", "GB", "--provider", "static", "--",
                           "greentrain-no-such-command"], tmp_path)
    assert proc.returncode == 127
    assert proc.stderr.splitlines() == ["greentrain: error: COMMAND: 'greentrain-no-such-command' not found; check "
                                        "the name or give a full path"]
    (tmp_path / "script.sh").write_text("echo hi\n")  # there, but not executable
    proc = greentrain_run(["--policy", "run-now", "--no-measure", "--", "./script.sh"], tmp_path)
    assert proc.returncode == 126 and len(proc.stderr.splitlines()) == 1, proc.stderr


def write_dirty_then_clean_trace(path: Path) -> None:
    """Electricity Maps format, zone TL: 900 g/kWh on 2022-03-10 from 00:00 to 06:00, 100 otherwise."""
    header = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
              "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
              "Data Estimated,Data Estimation Method")
    rows = [header]
    for day in (9, 10, 11):
        for hour in range(24):
            value = 900 if day == 10 and hour < 6 else 100
            rows.append(f"2022-03-{day:02d} {hour:02d}:00:00,Testland,Test,TL,{value},{value},50,50,test,false,")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_ctrl_c_during_a_delayed_start_is_130_and_no_traceback(tmp_path: Path) -> None:
    write_dirty_then_clean_trace(tmp_path / "trace.csv")
    # One trace hour per 10 real seconds: the delayed start lasts about a minute, long enough to be interrupted.
    args = [sys.executable, "-m", "greentrain", "run", "--policy", "carbon-aware", "--zone", "TL", "--provider",
            f"csv:{tmp_path / 'trace.csv'}", "--replay-speedup", "360", "--replay-start", "2022-03-10T00:30Z",
            "--deadline", "+20", "--estimate-hours", "1", "--no-measure", "--interval-s", "0.05", "--",
            sys.executable, "-c", "print('ran')"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=ENV)
    out, err = interrupt_after(proc, "delaying start")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "ran" not in out, "the command never started"
    assert len([line for line in err.splitlines() if "during the delayed start; the command never started" in line]) == 1
    done = [line for line in err.splitlines() if line.startswith("greentrain: done:")]
    assert len(done) == 1 and "stopped by SIGINT (exit 130)" in done[0] and "avoided" not in done[0], err


def test_ctrl_c_while_an_undeclared_command_runs_is_130_and_one_line(tmp_path: Path) -> None:
    started = tmp_path / "started"
    child = ("import signal, sys, time\n"
             "signal.signal(signal.SIGINT, lambda *a: sys.exit(1))\n"
             f"open({str(started)!r}, 'w').close()\n"
             "time.sleep(30)\n")
    args = [sys.executable, "-m", "greentrain", "run", "--policy", "run-now", "--zone", "GB", "--provider", "static",
            "--deadline", "+2", "--estimate-hours", "1", "--interval-s", "0.05", "--", sys.executable, "-c", child]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=ENV)
    try:
        give_up = time.monotonic() + 40
        while time.monotonic() < give_up and not started.exists():
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if "stopped by SIGINT: the command got SIGINT" in line]) == 1
    done = [line for line in err.splitlines() if line.startswith("greentrain: done:")]
    assert len(done) == 1 and "stopped by SIGINT (exit 130)" in done[0]
    assert " met" not in done[0] and "avoided" not in done[0]
