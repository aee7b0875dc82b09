"""Job sets for the fleet benchmark, drawn from a public cluster trace's distributions.

The source is the Alibaba PAI sample shipped with GAIA (1,000 jobs over a
week: ``arrival_time`` s, ``length`` s, ``cpus`` 1-4). A job set keeps the
trace's arrival pattern and its joint length/width distribution:

* rows are drawn at random without replacement (with replacement for sets larger
  than the sample); each keeps its arrival offset (seconds from the trace's first
  job), placed on the chosen week;
* widths: 1, 2, 3, 4 CPUs become 1, 4, 8, 16 GPUs (one GPU, half an 8-GPU node,
  a node, two nodes);
* lengths are multiplied by one factor per set, found so that the set asks for
  ``load`` of the cluster's GPU-hours over the week, each job capped at
  ``max_work_h`` (GPU training runs are longer than the CPU jobs of the trace;
  the cap keeps every job inside a week's planning);
* deadline = work + slack, the slack drawn uniformly in [24, 48] h: each job
  tolerates one to two days of delay.

    python benchmarks/fleet_jobs.py PAI.csv 2022-03-07T00:00Z out.csv [--jobs 300] [--seed 1]
"""

from __future__ import annotations

import argparse
import csv
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

WIDTH_GPUS = {1: 1, 2: 4, 3: 8, 4: 16}
SLACK_H = (24.0, 48.0)


@dataclass(frozen=True, slots=True)
class TraceJob:
    arrival_s: float
    length_s: float
    cpus: int


def read_pai(path: Path) -> list[TraceJob]:
    with path.open(newline="") as handle:
        return [TraceJob(float(r["arrival_time"]), float(r["length"]), int(r["cpus"])) for r in csv.DictReader(handle)]


def _length_factor(rows: list[TraceJob], target_gpu_h: float, max_work_h: float) -> float:
    """Factor k with sum(gpus * min(k * length, cap)) = target (bisection: the sum grows with k)."""
    def total(k: float) -> float:
        return sum(WIDTH_GPUS[r.cpus] * min(k * r.length_s / 3600.0, max_work_h) for r in rows)

    lo, hi = 0.0, 1.0
    while total(hi) < target_gpu_h:
        hi *= 2.0
        if hi > 1e6:
            raise ValueError("load not reachable under the work cap")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total(mid) < target_gpu_h else (lo, mid)
    return hi


def job_set(source: list[TraceJob], start: datetime, *, jobs: int, seed: int, capacity_gpus: int = 64,
            load: float = 0.55, days: float = 7.0, max_work_h: float = 48.0) -> list[dict[str, str]]:
    """Rows of a jobs CSV (``id,submit,gpus,work_hours,deadline_hours``), in submission order."""
    rng = random.Random(seed)
    span_s = max(r.arrival_s for r in source) or 1.0
    drawn = rng.sample(source, jobs) if jobs <= len(source) else rng.choices(source, k=jobs)
    rows = sorted(drawn, key=lambda r: r.arrival_s)
    factor = _length_factor(rows, load * capacity_gpus * days * 24.0, max_work_h)
    out = []
    for i, r in enumerate(rows):
        work_h = max(0.05, min(factor * r.length_s / 3600.0, max_work_h))
        submit = start + timedelta(seconds=r.arrival_s * days * 86400.0 / span_s)
        out.append({"id": f"job{i:04d}", "submit": submit.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "gpus": str(WIDTH_GPUS[r.cpus]), "work_hours": f"{work_h:.3f}",
                    "deadline_hours": f"{work_h + rng.uniform(*SLACK_H):.3f}"})
    return out


def write_jobs(rows: list[dict[str, str]], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "submit", "gpus", "work_hours", "deadline_hours"])
        writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pai", type=Path)
    parser.add_argument("start", type=lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")))
    parser.add_argument("out", type=Path)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--capacity-gpus", type=int, default=64)
    parser.add_argument("--load", type=float, default=0.55)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    write_jobs(job_set(read_pai(args.pai), args.start, jobs=args.jobs, seed=args.seed,
                       capacity_gpus=args.capacity_gpus, load=args.load), args.out)


if __name__ == "__main__":
    main()
