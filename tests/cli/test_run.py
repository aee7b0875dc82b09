"""`greentrain run`: bad input is one line + exit 2; output and exit status pass through."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.cli import main
from greentrain.events import read_events
from tests.gt_commands import CHECKPOINTING_WORKER

pytestmark = pytest.mark.timeout(60)

PY = sys.executable


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(["run", *args])
    return int(exc.value.code or 0)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--deadline", "2030-01-01T00:00", "--estimate-hours", "1"], "has no timezone"),
        (["--deadline", "2020-01-01T00:00Z", "--estimate-hours", "1"], "is in the past"),
        (["--deadline", "+1", "--estimate-hours", "5"], "--deadline-policy best-effort"),
        (["--deadline", "+3"], "--estimate-hours"),
        (["--deadline", "soon", "--estimate-hours", "1"], "is not ISO-8601"),
        (["--policy", "no-such-policy"], "unknown policy or preset 'no-such-policy'"),
        (["--policy", "/nonexistent/policy.toml"], "/nonexistent/policy.toml"),
        (["--checkpoint-signal", "SIGNOPE"], "--checkpoint-signal"),
        (["--interval-s", "0"], "--interval-s"),
        (["--estimate-hours", "-2"], "--estimate-hours"),
        (["--replay-start", "2022-01-01T00:00Z"], "--replay-speedup"),
        (["--max-emissions-g", "-5"], "--max-emissions-g"),
        (["--max-energy-j", "lots"], "--max-energy-j"),
        (["--waiting-power-w", "-1"], "--waiting-power-w"),
        (["--waiting-power-w", "nan"], "--waiting-power-w"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli([*args, "--no-measure", "--", PY, "-c", "raise SystemExit(9)"])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith(("Error", "greentrain: error"))]) == 1


def test_missing_or_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--no-measure"]) == 2
    assert "Missing argument 'COMMAND" in capsys.readouterr().err
    assert run_cli(["--no-measure", "--policy", "run-now", "--", "greentrain-no-such-cmd"]) == 127
    err = capsys.readouterr().err
    assert "'greentrain-no-such-cmd' not found" in err and "Traceback" not in err
    assert err.strip().count("\n") == 0 and "plan:" not in err and "energy" not in err, "one line, nothing run"


def test_output_and_exit_status_pass_through(capfd: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["--policy", "run-now", "--no-measure", "--interval-s", "0.05", "--",
                    PY, "-c", "import sys; print('hello from child'); print('to stderr', file=sys.stderr); exit(4)"])
    out, err = capfd.readouterr()
    assert code == 4
    assert "hello from child" in out and "to stderr" in err


def test_killed_by_signal_is_128_plus_n() -> None:
    code = run_cli(["--policy", "run-now", "--no-measure", "--interval-s", "0.05", "--",
                    PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert code == 128 + 15


def test_best_effort_warns_and_runs_now(capfd: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["--deadline", "+1", "--estimate-hours", "5", "--deadline-policy", "best-effort",
                    "--no-measure", "--interval-s", "0.05", "--", PY, "-c", "print('ran')"])
    out, err = capfd.readouterr()
    assert code == 0 and "ran" in out
    assert "best-effort" in err


# ---- end to end: a real child process under a replayed synthetic trace ----------------------------------



def write_trace(path: Path) -> None:
    """Two weeks of an Electricity Maps-format export: 100 g/kWh, except 600 from 02:00 to 05:00 daily."""
    header = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
              "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
              "Data Estimated,Data Estimation Method")
    start = datetime(2022, 3, 1, tzinfo=UTC)
    rows = [header]
    for h in range(24 * 14):
        t = start + timedelta(hours=h)
        value = 600 if 2 <= t.hour < 5 else 100
        rows.append(f"{t:%Y-%m-%d %H:%M:%S},Testland,Test,TL,{value},{value + 50},50,50,test,false,")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.mark.parametrize("mode", ["suspend", "checkpoint"])
def test_run_pauses_a_real_command_through_the_dirty_hours(tmp_path: Path, mode: str) -> None:
    write_trace(tmp_path / "trace.csv")
    (tmp_path / "worker.py").write_text(CHECKPOINTING_WORKER)
    out, state, jsonl = tmp_path / "out.txt", tmp_path / "state", tmp_path / "run.jsonl"
    # One trace hour per second; 00:30 start, dirty 02:00-05:00, deadline 06:30: a clean plan runs
    # before 02:00, pauses, and finishes after 05:00 (not all of the work fits before 02:00).
    args = [sys.executable, "-m", "greentrain", "run", "--policy", "forecast-optimal", "--zone", "TL",
            "--provider", f"csv:{tmp_path / 'trace.csv'}", "--replay-speedup", "3600",
            "--replay-start", "2022-03-10T00:30Z", "--deadline", "+6", "--estimate-hours", "2",
            "--pause-mode", mode, "--no-measure", "--interval-s", "0.05", "--jsonl", str(jsonl), "--",
            sys.executable, str(tmp_path / "worker.py"), str(out), str(state), "30", "0.05"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=50, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 7, proc.stderr
    assert "worker finished" in proc.stdout
    rows = [line.split() for line in out.read_text().splitlines()]
    assert [int(r[0]) for r in rows] == list(range(30)), "every tick once"
    events = read_events(jsonl)
    paused = _paused_intervals(events)
    dirty = (_t("2022-03-10T02:00Z"), _t("2022-03-10T05:00Z"))
    overlap_h = sum(max(0.0, (min(b, dirty[1]) - max(a, dirty[0])).total_seconds()) for a, b in paused) / 3600
    assert overlap_h >= 1.5, f"paused through most of the dirty hours, got {overlap_h:.2f} h"
    summary = events[-1]
    pauses = sum(1 for e in events if e["event"] == "action" and e["action"] == "pause")
    assert summary["event"] == "summary" and summary["exit_status"] == 7
    assert summary["launches"] == (1 if mode == "suspend" else 1 + pauses), "one relaunch per checkpoint pause"
    assert summary["t"] <= "2022-03-10T06:30"
    if mode == "suspend":
        gaps = [float(b[1]) - float(a[1]) for a, b in zip(rows, rows[1:], strict=False)]
        paused_real_s = sum((b - a).total_seconds() for a, b in paused) / 3600  # one trace hour per second
        assert sum(g for g in gaps if g > 0.3) > 0.8 * paused_real_s, "the command was stopped while paused"
        assert {r[2] for r in rows} == {"0"}
    else:
        assert [r[2] for r in rows] == sorted(r[2] for r in rows), "launches resume where the last one stopped"
        assert len({r[2] for r in rows}) == 1 + pauses


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _paused_intervals(events: list[dict]) -> list[tuple[datetime, datetime]]:
    """(from, to) of every paused stretch, from the state events."""
    states = [(_t(e["t"]), e["state"]) for e in events if e["event"] == "state"]
    return [(t0, t1) for (t0, s0), (t1, _s1) in zip(states, states[1:], strict=False) if s0 == "paused"]

