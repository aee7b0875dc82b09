"""The live path against the simulator: does the running engine earn what the simulator shows, on a busy machine?

For each start (spread over the dev traces in ../shared/data/carbon, one per trace in turn) this runs
``greentrain demo`` as a user would (a subprocess: Session, engine, checkpoint pauses and resumes,
measured energy, the trace replayed at ``--speedup``) while one competing busy process spins on the
machine, then replays the same start through ``greentrain simulate`` for the job's measured running time
(same policy, same forecaster; no idle draw and no resume overhead, as in the demo: its CPU-only pauses hold no GPU and its clock stands still while it reloads). It prints per
start the live net saving vs run-now, the simulator's, and the oracle's, and at the end the pooled ratio
(mean live saving ÷ mean oracle saving; a per-start ratio explodes on flat days), how many runs emitted
more than run-now by over 1 %, and how many missed their deadline.

Starts run in sequence; ``--budget-min`` stops starting new ones once spent (the table says how many ran).

    python benchmarks/live.py [--starts 12] [--speedup 4000] [--steps 32] [--budget-min 40] [--no-load]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "carbon"
HISTORY_DAYS = 35
"""Days of trace before the first start (the forecaster's history)."""
SPACING_DAYS = 53
"""Days between the starts on one trace (a prime: the weekday and season rotate)."""
WORSE_BY = 0.01


@dataclass(frozen=True, slots=True)
class Row:
    """One start: the live demo's net saving and the simulator's and oracle's for the same start."""

    trace: str
    start: datetime
    live: float | None
    sim: float | None
    oracle: float | None
    met: bool
    running_h: float
    wall_s: float
    pauses: int


def _starts(count: int, data: Path) -> list[tuple[Path, datetime]]:
    """``count`` starts: one per trace in turn (zones and years alternate), midnight UTC, spaced apart."""
    traces = sorted(data.glob("*_hourly.csv"))
    if not traces:
        raise SystemExit(f"benchmarks/live.py: no *_hourly.csv traces in {data}")
    out = []
    for i in range(count):
        trace = traces[i % len(traces)]
        year = int(trace.stem.split("_")[-2])
        day = HISTORY_DAYS + (i // len(traces)) * SPACING_DAYS + 11 * (i % len(traces))
        out.append((trace, datetime(year, 1, 1, tzinfo=UTC) + timedelta(days=day)))
    return out


def _zone(trace: Path) -> str:
    return trace.stem.rsplit("_", 2)[0]


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%MZ")


def _live(trace: Path, start: datetime, args: argparse.Namespace, folder: Path) -> tuple[dict, dict, float]:
    """Run the demo for one start; (its --json summary, its demo.json, wall seconds)."""
    out = folder / f"{_zone(trace)}-{start:%Y%m%d}"
    cmd = [sys.executable, "-m", "greentrain", "demo", "--out", str(out), "--trace", str(trace), "--zone",
           _zone(trace), "--start", _iso(start), "--speedup", f"{args.speedup:g}", "--work-hours",
           f"{args.work_hours:g}", "--deadline", f"+{args.deadline_hours:g}", "--steps", str(args.steps),
           "--policy", args.policy, "--metrics-port", "0", "--no-progress",
           "--no-report", "--json"]
    for attempt in range(3):  # a free port picked by the demo can be taken by another process before it binds
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        wall_s = time.perf_counter() - started
        if done.returncode in (0, 3):
            return json.loads(done.stdout), json.loads((out / "demo.json").read_text()), wall_s
        print(f"# demo failed for {trace.name} {_iso(start)} (attempt {attempt + 1}): "
              f"{done.stderr.strip().splitlines()[-1:]}", file=sys.stderr, flush=True)
        out = out.with_name(f"{out.name}-retry{attempt + 1}")
        cmd[cmd.index("--out") + 1] = str(out)
    raise RuntimeError(f"demo failed three times for {trace.name} {_iso(start)}")


def _simulated(trace: Path, start: datetime, running_h: float, args: argparse.Namespace) -> dict:
    """``greentrain simulate`` for the same start and the measured running time (its JSON summary)."""
    cmd = [sys.executable, "-m", "greentrain", "simulate", "--trace", str(trace), "--start", _iso(start),
           "--work-hours", f"{running_h:.6f}", "--deadline-hours", f"{args.deadline_hours:g}", "--policy",
           args.policy, "--idle-power-kw", "0", "--resume-overhead-min", "0", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["summary"]


def _saving(summary: dict) -> float | None:
    run_now = summary["run_now_emissions_g"]
    return summary["emissions_avoided_net_g"] / run_now if run_now > 0 else None


def _one(trace: Path, start: datetime, args: argparse.Namespace, folder: Path) -> Row:
    summary, state, wall_s = _live(trace, start, args, folder)
    step_job_s = state.get("step_job_s") or state["step_time_real_s"] * state["speedup"]
    running_h = summary["steps_done"] * step_job_s / 3600.0
    sim = _simulated(trace, start, running_h, args)
    return Row(trace=trace.stem.removesuffix("_hourly"), start=start, live=_saving(summary),
               sim=sim["saving_vs_run_now"], oracle=sim["oracle_saving_vs_run_now"], met=bool(summary["deadline_met"]),
               running_h=running_h, wall_s=wall_s, pauses=int(summary.get("pauses", 0)))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f} %"


def _report(rows: list[Row], args: argparse.Namespace, load: bool, elapsed_s: float) -> None:
    print(f"benchmarks/live.py on {platform.node() or 'this machine'} ({os.cpu_count()} CPUs), "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {args.work_hours:g} h of work, {args.deadline_hours:g} h "
          f"deadline, --speedup {args.speedup:g}, {args.steps} steps, policy {args.policy}, "
          f"{'one competing busy process' if load else 'no load generator'}")
    print()
    print("| trace | start | live net saving | simulator, same start | oracle, measured running time | "
          "deadline | running (simulated) | pauses | wall |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.trace} | {_iso(r.start)} | {_pct(r.live)} | {_pct(r.sim)} | {_pct(r.oracle)} | "
              f"{'met' if r.met else 'MISSED'} | {r.running_h:.1f} h | {r.pauses} | {r.wall_s:.0f} s |")
    scored = [r for r in rows if r.live is not None and r.oracle is not None and r.sim is not None]
    if not scored:
        print("\nno run finished with a run-now figure")
        return
    live, sim, oracle = (statistics.fmean(getattr(r, k) for r in scored) for k in ("live", "sim", "oracle"))
    worse = sum(r.live < -WORSE_BY for r in scored)
    missed = sum(not r.met for r in rows)
    ratio = live / oracle if oracle > 1e-12 else float("nan")
    sim_ratio = sim / oracle if oracle > 1e-12 else float("nan")
    print(f"\nstarts: {len(rows)} of {args.starts} (wall {elapsed_s / 60:.1f} min); mean live saving "
          f"{100 * live:.1f} %, simulator {100 * sim:.1f} %, oracle {100 * oracle:.1f} %")
    print(f"pooled: live / oracle = **{ratio:.2f}** (simulator / oracle = {sim_ratio:.2f}); runs worse than run-now "
          f"by > {WORSE_BY:.0%}: {worse}; deadlines missed: {missed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of *_hourly.csv traces")
    parser.add_argument("--starts", type=int, default=12)
    parser.add_argument("--speedup", type=float, default=4000.0)
    parser.add_argument("--work-hours", type=float, default=8.0)
    parser.add_argument("--deadline-hours", type=float, default=24.0)
    parser.add_argument("--steps", type=int, default=32, help="steps the work is cut into (each is real training)")
    parser.add_argument("--policy", default="carbon-aware")
    parser.add_argument("--budget-min", type=float, default=40.0, help="start no new run after this many minutes")
    parser.add_argument("--no-load", action="store_true", help="without the competing busy process")
    args = parser.parse_args()
    load = None if args.no_load else subprocess.Popen([sys.executable, "-c", "while True: pass"])
    rows: list[Row] = []
    began = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="gt-live-") as folder:
            for trace, start in _starts(args.starts, args.data):
                if time.perf_counter() - began > args.budget_min * 60:
                    print(f"# budget spent: stopping after {len(rows)} starts", file=sys.stderr)
                    break
                try:
                    rows.append(_one(trace, start, args, Path(folder)))
                except (RuntimeError, subprocess.CalledProcessError) as e:
                    print(f"# skipped {trace.name} {_iso(start)}: {e}", file=sys.stderr, flush=True)
                    continue
                r = rows[-1]
                print(f"# {r.trace} {_iso(r.start)}: live {_pct(r.live)}, sim {_pct(r.sim)}, oracle {_pct(r.oracle)}, "
                      f"{'met' if r.met else 'MISSED'} ({r.wall_s:.0f} s)", file=sys.stderr, flush=True)
    finally:
        if load is not None:
            load.terminate()
            load.wait()
    _report(rows, args, load is not None, time.perf_counter() - began)


if __name__ == "__main__":
    main()
