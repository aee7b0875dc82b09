"""A rank SIGKILLed mid-run: ``torchrun --max-restarts`` brings the group back from the last checkpoint.

Real processes, real kill: the test launches ``greentrain train --nproc 2
--max-restarts 1``, waits until rank 0 has logged some steps, SIGKILLs the
rank-1 worker and checks the job finishes, losing only steps since the last
checkpoint, and that the re-run steps reproduce the lost ones exactly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

STEPS = 60
INTERVAL = 10
KILL_AFTER = 14  # steps logged before the kill


def _worker_pid(launcher_pid: int, local_rank: str) -> int | None:
    """The torchrun worker process (a child of the launcher) with the given LOCAL_RANK."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != launcher_pid:
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if f"LOCAL_RANK={local_rank}".encode() in env:
            return int(entry.name)
    return None


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_killed_rank_resumes_from_last_checkpoint(tmp_path: Path) -> None:
    jsonl, ckpt = tmp_path / "m.jsonl", tmp_path / "ckpt"
    cmd = [sys.executable, "-m", "greentrain", "train", "--config", "tiny", "--nproc", "2", "--max-restarts", "1",
           "--dp-shard", "2", "--steps", str(STEPS), "--set", "data.max_bytes=200000",
           "--checkpoint-dir", str(ckpt), "--checkpoint-interval", str(INTERVAL), "--metrics-jsonl", str(jsonl),
           "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 150
        killed_after = None
        while time.monotonic() < deadline and proc.poll() is None:
            logged = _lines(jsonl)
            if len(logged) >= KILL_AFTER:
                launcher = _launcher_pid(proc.pid)
                victim = _worker_pid(launcher, "1") if launcher else None
                if victim is not None:
                    os.kill(victim, signal.SIGKILL)
                    killed_after = len(_lines(jsonl))
                    break
            time.sleep(0.02)
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed_after is not None and killed_after < STEPS, f"could not kill a rank mid-run:\n{output[-3000:]}"
    assert proc.returncode == 0, output[-3000:]
    records = _lines(jsonl)
    steps = [r["step"] for r in records]
    restart_at = next((i for i in range(1, len(steps)) if steps[i] <= steps[i - 1]), None)
    if restart_at is None:  # killed right after a checkpoint: nothing to redo, nothing lost
        assert steps == list(range(1, STEPS + 1)) and "exitcode: -9" in output
        return
    last_before, resumed_from = steps[restart_at - 1], steps[restart_at] - 1
    assert resumed_from % INTERVAL == 0 and resumed_from <= last_before, steps
    assert last_before - resumed_from <= INTERVAL, "lost more than the steps since the last checkpoint"
    assert steps[restart_at:] == list(range(resumed_from + 1, STEPS + 1)), "after the restart every step once"
    assert steps[:restart_at] == list(range(1, last_before + 1))
    redone = [r for r in records[restart_at:] if r["step"] <= last_before]
    for redo in redone:  # steps the killed run had done: the restart reproduces them
        original = records[redo["step"] - 1]
        assert abs(redo["loss"] - original["loss"]) <= 1e-6
        assert abs(redo["grad_norm"] - original["grad_norm"]) <= 1e-5 * original["grad_norm"]


def _launcher_pid(cli_pid: int) -> int | None:
    """``greentrain train --nproc`` runs torchrun as its child: find it."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == cli_pid:
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None
