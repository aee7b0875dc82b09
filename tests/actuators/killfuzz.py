"""Signal fuzzing of children that change GPU settings (used by the test and benchmarks/reliability_actuation.py).

Each round starts ``child_actuate.py user-handler-loop`` (or ``default-loop``)
on its own file-backed GPU, waits a random time while the child changes settings in a tight loop,
sends SIGTERM or SIGINT (sometimes a second signal soon after), and checks
after the child has exited that the GPU is back at its defaults with an empty
journal, without any recovery run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from greentrain.actuators import Journal
from greentrain.testing import FileBackedGPU

CHILD = Path(__file__).with_name("child_actuate.py")


@dataclass(frozen=True)
class Round:
    """What one signalled child did."""

    signals_sent: int
    rc: int
    hung: bool
    """The child was still alive a minute after the signal (killed then; its stack is in ``detail``)."""
    leaked: bool
    """The GPU was not at its defaults, or a journal entry remained, after the child exited."""
    lost: bool
    """The GPU was left changed with no journal entry: not even the next start can restore it."""
    in_apply: bool
    """The first signal landed inside ``ActuatorSet.apply``."""
    restored_at_boundary: bool
    held: bool
    detail: str


def _start(root: Path, seed: int, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(root / "state"), str(root / "gpu.json"), mode, str(seed)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _finish(root: Path, proc: subprocess.Popen[str], sent: int, timeout_s: float = 60.0) -> Round:
    hung = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:  # a child that neither exits nor dies: get its stack, then kill it
        hung = True
        proc.send_signal(signal.SIGUSR1)  # faulthandler in child_actuate.py dumps every thread's stack
        time.sleep(1.0)
        proc.kill()
        out, err = proc.communicate()
    gpu = FileBackedGPU(root / "gpu.json", "a40")
    entries = Journal(root / "state", gpu.uuid).entries()
    leaked = not gpu.is_default() or bool(entries)
    fields = dict(part.split("=", 1) for line in out.splitlines() if line.startswith("stopped")
                  for part in line.split()[1:])
    detail = (f"rc={proc.returncode} hung={hung} gpu={gpu.settings()} journal={sorted(entries)} out={out!r} "
              f"err={err[-3000:] if hung else err[-400:]!r}")
    return Round(signals_sent=sent, rc=proc.returncode, leaked=leaked, lost=not gpu.is_default() and not entries,
                 hung=hung, in_apply=fields.get("in_apply") == "1",
                 restored_at_boundary=fields.get("restored_at_boundary") == "1", held=fields.get("held") == "1",
                 detail=detail)


def run_rounds(workdir: Path, rounds: int, seed: int, parallel: int = 4, *, own_handler: bool = True) -> list[Round]:
    """``rounds`` signalled children, ``parallel`` at a time, each on its own GPU file and state dir.

    ``own_handler``: the child installs a stop-flag handler (else Python's defaults end it at the signal).
    """
    mode = "user-handler-loop" if own_handler else "default-loop"
    rng = random.Random(seed)
    results: list[Round] = []
    for first in range(0, rounds, parallel):
        batch = []
        for i in range(first, min(rounds, first + parallel)):
            root = workdir / f"round-{i}"
            root.mkdir(parents=True, exist_ok=True)
            proc = _start(root, seed * 1000 + i, mode)
            batch.append((root, proc))
        plans = []
        for root, proc in batch:
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"child did not start: {line!r} {proc.stderr.read()}")
            plans.append((time.monotonic() + rng.uniform(0.0, 0.15), rng.choice([signal.SIGTERM, signal.SIGINT]),
                          rng.random() < 0.3))
        sent = [0] * len(batch)
        for k in sorted(range(len(batch)), key=lambda k: plans[k][0]):
            at, sig, twice = plans[k]
            proc = batch[k][1]
            time.sleep(max(0.0, at - time.monotonic()))
            proc.send_signal(sig)
            sent[k] = 1
            if twice:  # a second signal soon after, as an impatient user or a scheduler sends
                time.sleep(rng.uniform(0.0, 0.003))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT if sig == signal.SIGTERM else signal.SIGTERM)
                    sent[k] = 2
        for (root, proc), count in zip(batch, sent):
            results.append(_finish(root, proc, count))
    return results
