"""Third-party training scripts wrapped the documented way, with pauses forced by a replayed trace (issue 38).

Runs the scripts in ``../shared/clients`` (read its README; never copied into
the repository): each is copied into a temporary directory, changed there by
the fewest lines a user would add, and run twice: unwrapped, then wrapped.

- ``mingpt/projects/adder``: minGPT's own ``Trainer`` and its ``on_batch_end``
  callback; wrapped with ``Session`` (imports, one ``with`` around
  ``trainer.run()``, one ``session.step`` in the callback). Its first
  iteration includes an evaluation of the whole data set.
- ``pytorch-examples/ddp-tutorial-series``: a torchrun DDP script with its own
  snapshots and no signal handler. A CPU user changes device and backend to
  gloo (the patch, counted); it then runs unmodified under ``greentrain run``
  (``torchrun --nproc-per-node 2``).
- ``pytorch-examples/regression``: the smallest plain loop, wrapped with
  ``Session`` (its loop runs until the loss is small: ``steps_total`` is an
  estimate the user gives).

Every wrapped run replays the shipped GB trace (``csv:GB_2022``) with a
``ReplayClock`` (``--replay-speedup`` for ``greentrain run``) from a morning
peak (2022-03-14 06:00 UTC) with cleaner hours ahead, so the policy pauses;
deadline +24 h (+48 h for the DDP run, whose ``--estimate-hours`` is 1.5x its
unwrapped wall time, torchrun's start included). Per script the table
gives: lines changed (``diff -w``: re-indentation is not a change), steps lost
or repeated (the script's own step/epoch output), tracebacks, pauses,
whether the run log's times ever go back, run-log bytes per step, and wall
time against the unwrapped script (waits excluded: they are replayed).

Usage: python benchmarks/clients.py [--speedup 1800] [--start 2022-03-14T06:00Z] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLIENTS = REPO.parent / "shared" / "clients"
TRACEBACK = "Traceback (most recent call last)"


@dataclass
class Run:
    """One process tree's outcome."""

    rc: int
    wall_s: float
    out: str

    @property
    def tracebacks(self) -> int:
        return self.out.count(TRACEBACK)


@dataclass
class Row:
    """One script's line of the table."""

    script: str
    how: str
    lines_changed: int
    steps: int
    lost: int
    repeated: int
    tracebacks: int
    pauses: int
    monotonic: bool
    bytes_per_step: float
    plain_s: float
    wrapped_s: float
    waiting_s: float
    rc: int
    notes: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)

    @property
    def overhead(self) -> float:
        """Wrapped wall time less the replayed waits, over the unwrapped wall time."""
        return (self.wrapped_s - self.waiting_s) / self.plain_s if self.plain_s > 0 else float("nan")


# ---- helpers -------------------------------------------------------------------------------------


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout_s: float = 300.0) -> Run:
    """Run ``cmd``; stdout and stderr together (the order a user sees)."""
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
        return Run(proc.returncode, time.monotonic() - started, proc.stdout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return Run(124, time.monotonic() - started, out + f"\n[benchmark: timed out after {timeout_s:.0f} s]")


def patch(path: Path, edits: list[tuple[str, str]]) -> int:
    """Apply exact text edits to ``path``; the lines changed, ignoring indentation (``diff -w``)."""
    before = path.read_text()
    after = before
    for old, new in edits:
        if old not in after:
            raise SystemExit(f"benchmark: {path.name}: the text to change was not found: {old!r}")
        after = after.replace(old, new, 1)
    path.write_text(after)
    strip = lambda text: [line.strip() for line in text.splitlines()]  # noqa: E731
    changed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=strip(before), b=strip(after)).get_opcodes():
        if tag != "equal":
            changed += max(i2 - i1, j2 - j1)
    return changed


def log_facts(path: Path, speedup: float) -> tuple[int, bool, float, int]:
    """(pauses, times never go back by more than thread jitter, real seconds spent waiting, bytes) of a run log."""
    if not path.exists():
        return 0, True, 0.0, 0
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    times = [datetime.fromisoformat(e["t"].replace("Z", "+00:00")) for e in events]
    # Events from other threads (monitor samples, re-plans) may land a few milliseconds out of order: that is
    # under a trace minute at 3600x. A relaunch that restarts the calendar goes back hours.
    latest, back_s = times[0] if times else None, 0.0
    for t in times:
        back_s = max(back_s, (latest - t).total_seconds())
        latest = max(latest, t)
    monotonic = back_s <= max(600.0, speedup)
    pauses = sum(1 for e in events if e["event"] == "action" and e.get("action") in ("pause", "delay_start"))
    waiting_s, since = 0.0, None
    for t, e in zip(times, events, strict=True):
        if e["event"] != "state":
            continue
        if e["state"] in ("paused", "waiting") and since is None:
            since = t
        elif e["state"] == "running" and since is not None:
            waiting_s += (t - since).total_seconds()
            since = None
    return pauses, monotonic, waiting_s / speedup, path.stat().st_size


def lost_and_repeated(seen: list[int], expected: range) -> tuple[int, int]:
    """Steps of ``expected`` never seen, and steps seen more than once."""
    unique = set(seen)
    return len(set(expected) - unique), len(seen) - len(unique)


def python_env(*paths: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")]),
            "OMP_NUM_THREADS": "1", "GREENTRAIN_FORECAST_ARCHIVE": "off"}


def clock_lines(start: str, speedup: float, indent: str) -> str:
    """The replay lines the docs show ("Replay a day in seconds")."""
    when = datetime.fromisoformat(start.replace("Z", "+00:00"))
    return (f"{indent}clock = ReplayClock(datetime({when.year}, {when.month}, {when.day}, {when.hour}, "
            f"tzinfo=UTC), speedup={speedup:g})\n")


IMPORTS = "from datetime import UTC, datetime\nfrom greentrain import Session\nfrom greentrain.clock import ReplayClock\n"


# ---- the scripts ---------------------------------------------------------------------------------


def mingpt(work: Path, args: argparse.Namespace) -> Row:
    """minGPT's adder: its Trainer, its callback, its evaluation inside iteration 0; Session in suspend mode."""
    iters = args.mingpt_iters
    plain, wrapped = work / "mingpt-plain", work / "mingpt-wrapped"
    for copy in (plain, wrapped):
        shutil.copytree(CLIENTS / "mingpt", copy)
    jsonl = work / "mingpt.jsonl"
    script = wrapped / "projects" / "adder" / "adder.py"
    changed = patch(script, [
        ("from mingpt.utils import set_seed, setup_logging, CfgNode as CN\n",
         "from mingpt.utils import set_seed, setup_logging, CfgNode as CN\n" + IMPORTS),
        ("        global top_score\n", "        global top_score\n        session.step(loss=trainer.loss.item())\n"),
        ("    trainer.run()\n",
         clock_lines(args.start, args.speedup, "    ")
         + f"    with Session(policy=\"carbon-aware\", zone=\"GB\", provider=\"csv:GB_2022\", clock=clock, "
           f"deadline=\"+24\",\n                 steps_total=config.trainer.max_iters, jsonl={str(jsonl)!r}) "
           "as session:\n        trainer.run()\n"),
    ])
    # CPU-sized: no loader workers, batches of 32, 1-digit sums (the evaluation in iteration 0 stays: 100 sums).
    argv = [f"--trainer.max_iters={iters}", "--trainer.num_workers=0", "--trainer.device=cpu",
            "--trainer.batch_size=32", "--data.ndigit=1"]
    results = []
    for copy in (plain, wrapped):
        results.append(run([sys.executable, "projects/adder/adder.py", *argv], cwd=copy, env=python_env(copy)))
    seen = [int(m) for m in re.findall(r"iter (\d+): train loss", results[1].out)]
    lost, repeated = lost_and_repeated(seen, range(0, iters, 10))
    pauses, monotonic, waiting_s, size = log_facts(jsonl, args.speedup)
    return _with_decisions(jsonl, Row("minGPT adder (own Trainer + callback)", "Session in the callback", changed, iters, lost, repeated,
               results[1].tracebacks, pauses, monotonic, size / iters, results[0].wall_s, results[1].wall_s,
               waiting_s, results[1].rc, _notes(results)))


DDP_CPU_PATCH = [
    ('    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\n', ""),
    ('init_process_group(backend="nccl")', 'init_process_group(backend="gloo")'),
    ("        self.model = model.to(self.gpu_id)\n", "        self.model = model\n"),
    ('        loc = f"cuda:{self.gpu_id}"\n', '        loc = "cpu"\n'),
    ("        self.model = DDP(self.model, device_ids=[self.gpu_id])\n", "        self.model = DDP(self.model)\n"),
    ("            source = source.to(self.gpu_id)\n            targets = targets.to(self.gpu_id)\n", ""),
]
"""What a CPU user changes: device and backend (the script asks for CUDA and NCCL)."""


def ddp(work: Path, args: argparse.Namespace) -> Row:
    """The DDP tutorial under torchrun with gloo, run unmodified (beyond the CPU patch) under ``greentrain run``."""
    epochs = args.ddp_epochs
    plain, wrapped = work / "ddp-plain", work / "ddp-wrapped"
    changed = 0
    for copy in (plain, wrapped):
        shutil.copytree(CLIENTS / "pytorch-examples" / "ddp-tutorial-series", copy)
        changed = patch(copy / "multigpu_torchrun.py", DDP_CPU_PATCH)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "multigpu_torchrun.py", str(epochs), "5"]
    env = {"OMP_NUM_THREADS": "1", "GREENTRAIN_FORECAST_ARCHIVE": "off"}
    first = run(command, cwd=plain, env=env)
    estimate_h = max(0.05, 1.5 * first.wall_s * args.speedup / 3600.0)  # an honest upper bound, trace hours
    jsonl = work / "ddp.jsonl"
    second = run([sys.executable, "-m", "greentrain", "run", "--policy", "carbon-aware", "--provider", "csv:GB_2022",
                  "--replay-speedup", f"{args.speedup:g}", "--replay-start", args.start, "--deadline", "+48",
                  "--estimate-hours", f"{estimate_h:.3f}", "--jsonl", str(jsonl), "--", *command],
                 cwd=wrapped, env=env)
    seen = [int(m) for m in re.findall(r"\[GPU0\] Epoch (\d+) \|", second.out)]
    lost, repeated = lost_and_repeated(seen, range(epochs))
    per_epoch = re.search(r"Steps: (\d+)", second.out) or re.search(r"Steps: (\d+)", first.out)
    steps = epochs * (int(per_epoch.group(1)) if per_epoch else 1)
    pauses, monotonic, waiting_s, size = log_facts(jsonl, args.speedup)
    notes = _notes([first, second])
    if "Resuming training from snapshot" in second.out:
        notes.append("relaunched from its own snapshot")
    return _with_decisions(jsonl, Row("DDP tutorial (torchrun, gloo, 2 ranks)", "`greentrain run`, CPU/gloo patch", changed, steps, lost,
               repeated, second.tracebacks, pauses, monotonic, size / steps, first.wall_s, second.wall_s, waiting_s,
               second.rc, notes))


def regression(work: Path, args: argparse.Namespace) -> Row:
    """The plain regression loop, wrapped with Session (steps_total: the user's estimate of an open-ended loop)."""
    plain, wrapped = work / "regression-plain", work / "regression-wrapped"
    for copy in (plain, wrapped):
        shutil.copytree(CLIENTS / "pytorch-examples" / "regression", copy)
    jsonl = work / "regression.jsonl"
    loop = wrapped / "main.py"
    body = loop.read_text()
    start, end = body.index("for batch_idx in count(1):"), body.index("print('Loss:")
    indented = "".join(f"    {line}" if line.strip() else line for line in body[start:end].splitlines(True))
    indented = indented.replace("            param.data.add_(-0.1 * param.grad)\n",
                                "            param.data.add_(-0.1 * param.grad)\n        session.step(loss=loss)\n")
    changed = patch(loop, [
        ("import torch.nn.functional as F\n", "import torch.nn.functional as F\n" + IMPORTS),
        (body[start:end], clock_lines(args.start, args.speedup, "")
         + "with Session(policy=\"carbon-aware\", zone=\"GB\", provider=\"csv:GB_2022\", clock=clock, deadline=\"+24\",\n"
           f"             steps_total={args.regression_steps}, jsonl={str(jsonl)!r}) as session:\n" + indented),
    ])
    env = {"OMP_NUM_THREADS": "1", "GREENTRAIN_FORECAST_ARCHIVE": "off"}
    # Both runs draw the same target function: the benchmark seeds torch before the script (not a user line).
    seeded = ["-c", "import runpy, torch; torch.manual_seed(0); runpy.run_path('main.py', run_name='__main__')"]
    results = [run([sys.executable, *seeded], cwd=copy, env=env) for copy in (plain, wrapped)]
    batches = [int(m) for m in re.findall(r"after (\d+) batches", results[1].out)]
    logged = _step_numbers(jsonl)
    total = batches[0] if batches else 0
    lost, repeated = lost_and_repeated(logged, range(1, total + 1))
    pauses, monotonic, waiting_s, size = log_facts(jsonl, args.speedup)
    notes = _notes(results)
    plain_batches = re.findall(r"after (\d+) batches", results[0].out)
    if plain_batches and batches and int(plain_batches[0]) != total:
        notes.append(f"unwrapped run took {plain_batches[0]} batches, wrapped {total}")
    return _with_decisions(jsonl, Row("regression (plain loop)", "Session around the loop", changed, total, lost, repeated,
               results[1].tracebacks, pauses, monotonic, size / max(1, total), results[0].wall_s, results[1].wall_s,
               waiting_s, results[1].rc, notes))


def _with_decisions(jsonl: Path, row: Row) -> Row:
    row.decisions = _decisions(jsonl)
    return row


def _step_numbers(jsonl: Path) -> list[int]:
    """The ``step`` field of the run log's step events (1-based: step k ended the k-th step)."""
    if not jsonl.exists():
        return []
    return [int(e["step"]) for e in map(json.loads, jsonl.read_text().splitlines()) if e.get("event") == "step"]


def _decisions(jsonl: Path) -> list[str]:
    """The run log's decisions, in order (why a run did or did not pause)."""
    if not jsonl.exists():
        return []
    events = map(json.loads, jsonl.read_text().splitlines())
    return [f"{e['action']}: {e.get('reason', '')}" for e in events if e.get("event") == "action"]


def _notes(results: list[Run]) -> list[str]:
    """Exit statuses other than 0, and greentrain's own lines of the wrapped run (what a user reads)."""
    notes = [f"exit {r.rc}" for r in results if r.rc != 0]
    return notes + [line for line in results[-1].out.splitlines() if line.startswith("greentrain:")]


# ---- output --------------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    head = ("| script | wrapped with | lines changed | steps | lost / repeated | tracebacks | pauses | times go back "
            "| run log B/step | wall: plain / wrapped less waits (ratio) |\n|---|---|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r.script} | {r.how} | {r.lines_changed} | {r.steps:,} | {r.lost} / {r.repeated} | {r.tracebacks} | "
        f"{r.pauses} | {'no' if r.monotonic else '**yes**'} | {r.bytes_per_step:,.0f} | {r.plain_s:.1f} s / "
        f"{r.wrapped_s - r.waiting_s:.1f} s ({r.overhead:.2f}×) |\n" for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speedup", type=float, default=1800.0, help="trace seconds per real second")
    parser.add_argument("--start", default="2022-03-14T06:00Z", help="start of the replayed calendar")
    parser.add_argument("--mingpt-iters", type=int, default=60)
    parser.add_argument("--ddp-epochs", type=int, default=10)
    parser.add_argument("--regression-steps", type=int, default=2000, help="the user's estimate of the loop's steps")
    parser.add_argument("--only", nargs="*", choices=["mingpt", "ddp", "regression"], default=None)
    parser.add_argument("--keep", type=Path, default=None, help="work in this directory and keep it")
    parser.add_argument("--decisions", action="store_true", help="print each run log's decisions")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    if not CLIENTS.is_dir():
        print(f"benchmark: {CLIENTS} is absent: the third-party scripts are not here, nothing to run")
        return
    chosen = args.only or ["mingpt", "ddp", "regression"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="gt-clients-") as tmp:
        if args.keep is not None:  # the copies, their outputs and the run logs, for a closer look
            shutil.rmtree(args.keep, ignore_errors=True)
            args.keep.mkdir(parents=True)
            tmp = str(args.keep)
        for name in chosen:
            started = time.monotonic()
            row = {"mingpt": mingpt, "ddp": ddp, "regression": regression}[name](Path(tmp), args)
            rows.append(row)
            print(f"{row.script}: {time.monotonic() - started:.0f} s; " + "; ".join(row.notes), flush=True)
    text = table(rows)
    print(text)
    if args.decisions:
        for row in rows:
            print(f"{row.script}:", *row.decisions, sep="\n  ")
    if args.markdown is not None:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
