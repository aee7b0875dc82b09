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
    assert "Traceback" not in proc.stderr
