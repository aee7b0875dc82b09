"""One job across two zones against staying home (issue 39, part 5): a row of docs/benchmarks.md per case.

Each case runs ``greentrain simulate --trace HOME=FILE --trace OTHER=FILE --starts ... --json`` (the
default causal forecaster, carbon-aware, 15-minute migrations) and prints the row of the table in
docs/benchmarks.md, "Single job across zones": the job's emissions across zones and its saving over stay
home, greenest at start and the best zone's oracle, the runs in each zone, migrations, deadlines missed,
runs worse than stay home, and the wall time.

    python benchmarks/single_job_zones.py                 # the table's cases (tens of minutes under load)
    python benchmarks/single_job_zones.py --case GB,US-CAL-CISO --every-hours 336 --work-hours 24 \\
        --deadline-hours 72
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = {"GB": "greentrain/data/carbon/GB_2022_hourly.csv",
          "US-CAL-CISO": "greentrain/data/carbon/US-CAL-CISO_2022_hourly.csv",
          "DE-LU": "tests/data/carbon/DE-LU_2022_hourly.csv"}
CASES = [("DE-LU,GB", 168, 8, 24), ("GB,US-CAL-CISO", 336, 8, 24), ("US-CAL-CISO,GB", 336, 8, 24),
         ("GB,US-CAL-CISO", 336, 24, 72)]


def run_case(zones: str, every_h: float, work_h: float, deadline_h: float) -> str:
    traces = [arg for zone in zones.split(",") for arg in ("--trace", f"{zone}={TRACES[zone]}")]
    last = "2022-12-19T00:00Z" if deadline_h <= 24 else "2022-12-15T00:00Z"
    command = [sys.executable, "-m", "greentrain", "simulate", *traces, "--starts",
               f"2022-01-03T00:00Z,{last},{every_h:g}", "--work-hours", f"{work_h:g}", "--deadline-hours",
               f"{deadline_h:g}", "--json"]
    began = time.monotonic()
    out = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    wall_s = time.monotonic() - began
    doc = json.loads(out)
    s = doc["summary"]
    where = collections.Counter(r["segments"][0]["zone"] for r in doc["runs"] if r["segments"])
    kg = lambda grams: f"{grams / 1000:.1f}"  # noqa: E731
    pct = lambda frac: f"{100 * (frac or 0):.1f} %"  # noqa: E731
    return (f"| {zones.replace(',', ', ')} | {work_h:g} h / {deadline_h:g} h | {s['runs']}, every {every_h:g} h | "
            f"{kg(s['emissions_g'])} (**{pct(s['saving_vs_stay_home'])}**) | {kg(s['stay_home_emissions_g'])} | "
            f"{kg(s['greenest_at_start_emissions_g'])} ({pct(s['greenest_at_start_saving_vs_stay_home'])}) | "
            f"{kg(s['best_zone_oracle_emissions_g'])} ({pct(s['best_zone_oracle_saving_vs_stay_home'])}) | "
            f"{', '.join(f'{z} {n}' for z, n in where.items())} | {s['migrations']} ({s['runs_that_moved']} runs) | "
            f"{s['deadlines_missed']} | {s['runs_worse_than_stay_home']} | {wall_s:.0f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="HOME,OTHER (zones of the shipped and test traces)")
    parser.add_argument("--every-hours", type=float, default=336)
    parser.add_argument("--work-hours", type=float, default=8)
    parser.add_argument("--deadline-hours", type=float, default=24)
    args = parser.parse_args()
    cases = [(args.case, args.every_hours, args.work_hours, args.deadline_hours)] if args.case else CASES
    for case in cases:
        print(run_case(*case), flush=True)


if __name__ == "__main__":
    main()
