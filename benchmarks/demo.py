"""How much of the demo's time is the job, and what greentrain adds per step.

Runs ``greentrain demo`` once (a subprocess, like a user) into a temporary folder and reports, from its run
log and its state file:

- wall time against the simulated span divided by the speed-up (what a perfect replay would take);
- the mean real step time under the live Session (decisions, carbon signal, monitor, checkpoints) against
  the plain trainer's step time measured just before (``demo.json: step_time_real_s``): the ratio is the
  per-step overhead of the whole loop on this model, which is tiny, so the ratio is an upper bound.

    python benchmarks/demo.py [--speedup 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speedup", type=float, default=2000.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gt-demo-bench-") as folder:
        out = Path(folder) / "demo"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, "-m", "greentrain", "demo", "--out", str(out), "--speedup", f"{args.speedup:g}",
               "--metrics-port", "0", "--no-progress", "--no-report"]
        started = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall_s = time.perf_counter() - started
        state = json.loads((out / "demo.json").read_text())
        events = [json.loads(line) for line in (out / "run.jsonl").read_text().splitlines() if line.strip()]
    steps = [e for e in events if e["event"] == "step"]
    span_s = (datetime.fromisoformat(steps[-1]["t"]) - datetime.fromisoformat(state["start"])).total_seconds()
    step_real_s = statistics.median(e["duration_s"] for e in steps) / args.speedup
    plain_s = state["step_time_real_s"]
    print(f"demo at ×{args.speedup:g}: {len(steps)} steps, simulated span {span_s / 3600:.1f} h")
    print(f"wall time {wall_s:.1f} s vs span/speed-up {span_s / args.speedup:.1f} s "
          f"(ratio {wall_s / (span_s / args.speedup):.2f}; the rest is start-up, sizing and the summary)")
    print(f"median step under the Session {step_real_s * 1000:.0f} ms vs plain trainer {plain_s * 1000:.0f} ms "
          f"(ratio {step_real_s / plain_s:.2f})")


if __name__ == "__main__":
    main()
