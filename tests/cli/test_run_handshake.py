"""`greentrain run --pause-mode checkpoint` end to end: a program that declared the handshake is checkpointed
and relaunched; one that did not is suspended instead (one line), never killed and restarted from scratch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from greentrain.events import read_events
from tests.cli.test_run import write_trace
from tests.gt_commands import HANDSHAKE_WORKER, SNAPSHOT_WORKER
from tests.gt_interrupt import interrupt_after

pytestmark = pytest.mark.timeout(60)

FALLBACK = "pausing it by suspend instead"


@pytest.mark.parametrize(("worker", "declared"), [(HANDSHAKE_WORKER, True), (SNAPSHOT_WORKER, False)])
def test_checkpoint_mode_follows_the_declaration(tmp_path: Path, worker: str, declared: bool) -> None:
    write_trace(tmp_path / "trace.csv")  # dirty 02:00-05:00
    (tmp_path / "worker.py").write_text(worker)
    out, jsonl = tmp_path / "out.txt", tmp_path / "run.jsonl"
    args = [sys.executable, "-m", "greentrain", "run", "--policy", "forecast-optimal", "--zone", "TL",
            "--provider", f"csv:{tmp_path / 'trace.csv'}", "--replay-speedup", "3600",
            "--replay-start", "2022-03-10T00:30Z", "--deadline", "+6", "--estimate-hours", "2",
            "--pause-mode", "checkpoint", "--no-measure", "--interval-s", "0.05", "--jsonl", str(jsonl), "--",
            sys.executable, str(tmp_path / "worker.py"), str(out), str(tmp_path / "state"), "30", "0.05"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=50, cwd=tmp_path,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 7, proc.stderr
    ticks = [int(line.split()[0]) for line in out.read_text().splitlines()]
    assert ticks == list(range(30)), "every step once: none repeated, none lost"
    events = read_events(jsonl)
    pauses = sum(1 for e in events if e["event"] == "action" and e["action"] == "pause")
    summary = next(e for e in events if e["event"] == "summary")
    assert pauses >= 1
    assert summary["launches"] == (1 + pauses if declared else 1)
    assert proc.stderr.count(FALLBACK) == (0 if declared else 1), proc.stderr
    assert "pauses by checkpoint if the command declares the handshake, else suspend" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ctrl_c_while_a_declared_program_runs_saves_it_and_the_next_run_resumes(tmp_path: Path) -> None:
    import signal
    import time

    (tmp_path / "worker.py").write_text(HANDSHAKE_WORKER)
    out, state = tmp_path / "out.txt", tmp_path / "state"
    args = [sys.executable, "-m", "greentrain", "run", "--policy", "run-now", "--no-measure", "--interval-s", "0.05",
            "--", sys.executable, str(tmp_path / "worker.py"), str(out), str(state), "60", "0.05"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        give_up = time.monotonic() + 40
        while time.monotonic() < give_up and (not out.exists() or len(out.read_text().splitlines()) < 5):
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "the command saved its checkpoint" in err
    assert "avoided" not in err and "stopped by SIGINT (exit 130)" in err
    saved = int(state.read_text())
    assert 5 <= saved < 60
    again = subprocess.run(args, capture_output=True, text=True, timeout=50, cwd=tmp_path, env=env)
    assert again.returncode == 7, again.stderr
    ticks = [int(line.split()[0]) for line in out.read_text().splitlines()]
    assert ticks == list(range(60)), "resumed where it saved: no step lost or repeated"


@pytest.mark.timeout(90)
def test_ctrl_c_during_a_checkpoint_pause_is_130_and_resumable(tmp_path: Path) -> None:
    write_trace(tmp_path / "trace.csv")  # dirty 02:00-05:00
    (tmp_path / "worker.py").write_text(HANDSHAKE_WORKER)
    out, state = tmp_path / "out.txt", tmp_path / "state"
    # Ten trace minutes a second: it runs from 00:30 to 02:00 (about 9 s), then the pause would last about 18 s.
    args = [sys.executable, "-m", "greentrain", "run", "--policy", "forecast-optimal", "--zone", "TL",
            "--provider", f"csv:{tmp_path / 'trace.csv'}", "--replay-speedup", "600",
            "--replay-start", "2022-03-10T00:30Z", "--deadline", "+6", "--estimate-hours", "2",
            "--pause-mode", "checkpoint", "--no-measure", "--interval-s", "0.05", "--",
            sys.executable, str(tmp_path / "worker.py"), str(out), str(state), "2000", "0.05"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    _out, err = interrupt_after(proc, "paused until", timeout_s=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.count("the command saved its checkpoint") == 1
    ticks = [int(line.split()[0]) for line in out.read_text().splitlines()]
    assert int(state.read_text()) == len(ticks) and ticks == list(range(len(ticks))), "saved where it stopped"
