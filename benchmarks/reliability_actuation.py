"""Reliability of actuation under signals and of resumes (issue 17, items 1 and 2), measured, not assumed.

    OMP_NUM_THREADS=1 python benchmarks/reliability_actuation.py
    OMP_NUM_THREADS=1 python benchmarks/reliability_actuation.py --baseline-tree /tmp/before   # + the old code

1. Leaked GPU settings when the job has its own SIGINT/SIGTERM handler that only sets a stop flag:
   a child changes a file-backed GPU's power limit and clocks in a tight loop; SIGTERM or SIGINT (30 % of
   the time followed by a second one) lands at a random moment; after the child exits, a GPU not at its
   defaults or a journal entry left is a leak (no recovery is run first); a changed GPU with no journal
   entry is lost for good (the next start cannot restore it either).
2. The same with Python's default handlers (the child dies of the signal).
3. Diverging resumes: a job drawing from Python's ``random``, numpy and torch every step, paused (checkpoint
   and process exit) after random steps, one process per lifetime, against one uninterrupted run. A resume
   diverges when the first step it runs differs from the uninterrupted run's.

``--baseline-tree DIR`` runs every part again with ``DIR`` (a checkout of another version, e.g.
``git archive <commit> greentrain | tar -x -C DIR``) first on PYTHONPATH, side by side in one run.
The harnesses are the tests' own: tests/actuators/killfuzz.py and tests/session/gt_resume_job.py.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "actuators"), str(ROOT / "tests" / "session")]

from gt_resume_job import run_job  # noqa: E402
from killfuzz import run_rounds  # noqa: E402


def _signals(workdir: Path, rounds: int, seed: int, own_handler: bool) -> str:
    results = run_rounds(workdir, rounds, seed, own_handler=own_handler)
    sent = sum(r.signals_sent for r in results)
    leaked = sum(r.leaked for r in results)
    mid = sum(r.in_apply for r in results)
    died = sum(r.rc < 0 and not r.hung for r in results)
    for r in results:
        if r.hung or r.leaked:
            print(f"  ! {r.detail}", file=sys.stderr)
    extra = (f"; first signal inside apply(): {mid} of {len(results)}" if own_handler
             else f"; died of the signal: {died}")
    hung = sum(r.hung for r in results)
    lost = sum(r.lost for r in results)
    return (f"{leaked} left changed at exit ({lost} with no journal entry: lost for good), {hung} hung, "
            f"of {len(results)} children ({sent} signals){extra}")


def _resumes(workdir: Path, runs: int, pauses: int, steps: int, seed: int) -> str:
    reference, _ = run_job(workdir / "reference", steps, set())
    rng = random.Random(seed)
    diverging = total = runs_diverged = 0
    for run in range(runs):
        points = sorted(rng.sample(range(1, steps - 1), pauses))
        lines, _ = run_job(workdir / f"run-{run}", steps, set(points))
        by_step = {int(line.split()[0]): line for line in lines}
        if len(lines) != steps or sorted(by_step) != list(range(steps)):
            raise RuntimeError(f"run {run}: lost or repeated steps: {[line.split()[0] for line in lines]}")
        bad = sum(by_step[p] != reference[p] for p in points)  # the first step after each pause
        diverging += bad
        total += len(points)
        runs_diverged += any(by_step[i] != reference[i] for i in range(steps))
    return f"{diverging} diverging of {total} forced pauses ({runs_diverged} of {runs} runs differ anywhere)"


def _measure(label: str, tree: Path | None, args: argparse.Namespace, workdir: Path) -> None:
    if tree is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])
    print(f"\n### {label}")
    start = time.perf_counter()
    print(f"- own stop-flag handler: {_signals(workdir / 'own', args.rounds, args.seed, True)}")
    print(f"- default handlers: {_signals(workdir / 'default', args.default_rounds, args.seed + 1, False)}")
    print(f"- resumes: {_resumes(workdir / 'resume', args.runs, args.pauses, args.steps, args.seed)}")
    print(f"- wall time {time.perf_counter() - start:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="children signalled, with their own handler")
    parser.add_argument("--default-rounds", type=int, default=30, help="children signalled, default handlers")
    parser.add_argument("--runs", type=int, default=4, help="paused jobs compared with one uninterrupted run")
    parser.add_argument("--pauses", type=int, default=5, help="forced pauses per job")
    parser.add_argument("--steps", type=int, default=16, help="steps per job")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--baseline-tree", type=Path, help="also measure the greentrain package under this dir")
    args = parser.parse_args()
    saved = os.environ.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory(prefix="gt-reliability-") as tmp:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), saved])
        _measure("this tree", None, args, Path(tmp) / "this")
        if args.baseline_tree is not None:
            os.environ["PYTHONPATH"] = saved
            _measure(f"baseline: {args.baseline_tree}", args.baseline_tree.resolve(), args, Path(tmp) / "base")


if __name__ == "__main__":
    main()
