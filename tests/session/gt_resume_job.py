"""A training script that draws from Python's ``random``, numpy and torch every step, and its driver.

Run as a script (``gt_resume_job.py WORKDIR STEPS PAUSES``) it is one process
lifetime of a job: it seeds the three global streams as scripts do at the top,
opens a Session on zone GB (building that signal imports httpx, which imports
rich, which draws from ``random`` at import), and appends one line per step
with the numbers it drew and the loss (dropout draws from torch). A pause
after each step in PAUSES (comma-separated, possibly empty) checkpoints and
ends the process; ``run_job`` starts lifetimes until the job is finished.
Imported, it gives ``run_job`` to the resume test and to
benchmarks/reliability_actuation.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_job(workdir: Path, steps: int, pauses: set[int], timeout_s: float = 120.0) -> tuple[list[str], int]:
    """Run the job to the end, one process per lifetime; returns (one line per step, lifetimes)."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ELECTRICITYMAPS", "WATTTIME", "GREENTRAIN_"))}
    env.update(OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    lifetimes = 0
    while True:
        lifetimes += 1
        if lifetimes > len(pauses) + 2:
            raise RuntimeError(f"job did not finish after {lifetimes - 1} lifetimes")
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), str(workdir), str(steps),
             ",".join(str(p) for p in sorted(pauses))],
            capture_output=True, text=True, timeout=timeout_s, env=env,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"lifetime {lifetimes} failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
        if proc.stdout.strip().endswith("finished"):
            return (workdir / "steps.txt").read_text().splitlines(), lifetimes


def _main(workdir: Path, steps: int, pauses: set[int]) -> None:
    import random

    import numpy as np
    import torch

    random.seed(1234)
    np.random.seed(1234)
    torch.manual_seed(1234)  # a relaunched script seeds again: the checkpoint's state must win

    sys.path[:0] = [str(HERE), str(HERE.parent / "engine")]
    from gt_session_loop import PauseAtSteps, make_model, train_step

    from datetime import UTC, datetime, timedelta

    from gt_engine_doubles import TraceSignals, hourly, varying

    from greentrain.clock import SystemClock
    from greentrain.session import Session

    model, opt = make_model()
    torch.manual_seed(99)  # make_model seeds 0 for the weights; the loop's own stream starts here
    clock = SystemClock()
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    # GB's signal as a varying trace (a constant one never lets a job pause: policies/worth.py)
    signals = TraceSignals(hourly(hour - timedelta(hours=1), varying(200, 48)), clock)
    with Session(PauseAtSteps(pauses, pause_s=0.0), zone="GB", provider=signals, steps_total=steps, model=model, optimizer=opt,
                 checkpoint_dir=workdir / "ckpt", clock=clock, relaunch="none", devices=False,
                 progress=False, decide_interval_s=1e-9) as session:
        for step in range(session.start_step, steps):
            drawn = (random.random(), random.getrandbits(32), float(np.random.rand()), int(np.random.randint(1 << 30)),
                     float(torch.rand(1)))
            loss = train_step(model, opt, step)  # dropout draws from torch's generator too
            with open(workdir / "steps.txt", "a") as out:
                out.write(f"{step} {' '.join(repr(x) for x in drawn)} {loss.item()!r}\n")
            session.step(tokens=32, loss=loss)
            if session.should_stop:
                break
    print("finished" if session.finished else "stopped")


if __name__ == "__main__":
    _main(Path(sys.argv[1]), int(sys.argv[2]), {int(p) for p in sys.argv[3].split(",") if p})
