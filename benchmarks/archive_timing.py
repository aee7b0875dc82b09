"""carbon-aware's net timing with forecasts as issued: synthetic archives of known skill vs the trace alone.

For every dev trace (../shared/data/carbon) a synthetic forecast archive is
built (``synthetic_archive.py``: errors growing with the horizon,
autocorrelated in time, 7 % MAPE day-ahead × 0.5, 1 and 2) and replayed
through the simulator by ``ArchiveForecaster``, the code behind
``greentrain simulate --forecast-archive``:

* ``latest`` — the naive planner: the latest issued forecast taken as exact,
  re-planned every hour (greentrain's forecaster only past its end);
* ``skill`` — the shipped blend: provider and greentrain's own forecast
  weighted per hour ahead by their errors measured over the previous four
  weeks (causal: forecasts issued by then, actuals known by then).

``trace-only`` is the default ``Forecaster`` on the trace alone. Jobs, starts,
simulator and idle-aware oracle are ``timing.py``'s; the metric is the net
saving vs run-now as a fraction of the idle-aware oracle's. greentrain's own
forecasts at every hour are computed once per trace and cached (``--cache``),
as are the archives (``--archive-dir``).

    python benchmarks/archive_timing.py --cache /tmp/gt-own --archive-dir /tmp/gt-archives \\
        [--every-days 15] [--idle 0.15 0] [--jobs 8 24] [--scales 0.5 1 2] [--seed 26] [--json out.json]
    python benchmarks/archive_timing.py --merge a.json b.json   # the tables of runs split by trace

``--gate-off`` adds, beside each column, the same replay with the engine's wait gate bypassed (the
deadline guard kept): what the gate costs.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from greentrain.policies import load_policy
from greentrain.policies.slot_planner import Mode
from greentrain.signals.archive.store import ForecastArchive
from greentrain.signals.archive.replay import ArchiveForecaster
from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.archive.issued import IssuedForecasts
from greentrain.signals.trace import load_trace
from greentrain.sim import SimJob, TraceIndex, oracle, run_now, simulate_run

sys.path.insert(0, str(Path(__file__).parent))
from synthetic_archive import DEFAULT_SEED, write_archive  # noqa: E402
from timing import DATA, starts_for  # noqa: E402

HORIZON_H = 72
OWN_FROM_H = 7 * 24
"""greentrain's own forecasts are cached from the first week on (the skill window needs past ones)."""
POLICY = "carbon-aware"
SMALL_ORACLE_SAVING = 0.05


def _source_version() -> str:
    import greentrain.signals.forecast.forecaster as autocov
    import greentrain.signals.forecast.lagregression as direct

    return hashlib.sha256((inspect.getsource(autocov) + inspect.getsource(direct)).encode()).hexdigest()[:12]


def own_table(path: Path, points: list[IntensityPoint], cache_dir: Path) -> np.ndarray:
    """(trace hours × 72) default-Forecaster forecasts made at each hour from the trace up to it, as far as
    computed so far (NaN rows: not yet; ``TableForecaster`` fills them on demand); cached."""
    target = cache_dir / f"{path.stem}-{_source_version()}.npy"
    if target.exists():
        return np.load(target)
    return np.full((len(points), HORIZON_H), np.nan)


def save_own_table(path: Path, table: np.ndarray, cache_dir: Path) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(cache_dir / f"{path.stem}-{_source_version()}.npy", table)


class TableForecaster:
    """The default Forecaster's output, read from ``own_table`` (identical values; a row not computed yet is
    computed on first use, so a sparse set of starts costs only the hours it needs)."""

    horizon_independent = True

    def __init__(self, points: list[IntensityPoint], table: np.ndarray) -> None:
        self.points, self.table = points, table
        self.index = {p.start: i for i, p in enumerate(points)}
        self.forecaster = Forecaster()
        self.computed = 0

    def _row(self, t: int) -> np.ndarray:
        if t >= OWN_FROM_H - 1 and t < len(self.points) - 1 and np.isnan(self.table[t, 0]):
            made = self.forecaster.forecast(self.points[: t + 1], self.points[t].start, HORIZON_H)
            self.table[t, : len(made)] = [p.intensity_g_per_kwh for p in made]
            self.computed += 1
        return self.table[t]

    def forecast_values(self, history, now, horizon_h: int = HORIZON_H) -> np.ndarray | None:
        """The same values without building points (``ArchiveForecaster`` asks for many past hours)."""
        t = self.index.get(now)
        return None if t is None else self._row(t)[:horizon_h]

    def forecast(self, history, now, horizon_h: int = HORIZON_H) -> list[IntensityPoint]:
        t = self.index.get(now)
        if t is None or np.isnan(self._row(t)[0]):
            return []
        last = self.points[t]
        return [IntensityPoint(start=last.end + timedelta(hours=i), end=last.end + timedelta(hours=i + 1),
                               intensity_g_per_kwh=float(v), kind=Kind.FORECAST, provider=last.provider,
                               zone=last.zone, emission_factor=last.emission_factor, estimated=True)
                for i, v in enumerate(self.table[t, :horizon_h])]


def archive_for(path: Path, points: list[IntensityPoint], archive_dir: Path, scales: list[float],
                seed: int) -> tuple[Path, dict[str, float]]:
    """The trace's synthetic archive (one series per scale), built once per seed."""
    target = archive_dir / f"{path.stem}-seed{seed}.sqlite"
    names = {f"synthetic-{s:g}x": s for s in scales}
    if target.exists():
        with ForecastArchive(target, create=False) as archive:
            if {s.provider for s in archive.series()} >= set(names):
                return target, {}
        target.unlink()
    actual = np.array([p.intensity_g_per_kwh for p in points])
    measured = write_archive(actual, int(points[0].start.timestamp()), target, points[0].zone, names,
                             trace_name=path.stem, seed=seed)
    return target, measured


def evaluate(path: Path, args: argparse.Namespace) -> tuple[dict, dict]:
    """{(job, forecast column): [policy g, run-now g, oracle g, worse, missed, runs]}, and notes."""
    points = load_trace(path)
    trace = TraceIndex(points, path.name)
    own = TableForecaster(points, own_table(path, points, args.cache))
    archive_path, measured = archive_for(path, points, args.archive_dir, args.scales, args.seed)
    forecasters = {"trace-only": own}
    with ForecastArchive(archive_path, create=False) as archive:
        for scale in args.scales:
            name = f"synthetic-{scale:g}x"
            issued = IssuedForecasts(*archive.forecast_rows(name, points[0].zone), provider=name,
                                     zone=points[0].zone)
            for mode in args.modes:
                forecasters[f"{mode} {scale:g}x"] = ArchiveForecaster(issued, own, blend=mode == "skill")
    policy = load_policy(POLICY)
    totals: dict = defaultdict(lambda: [0.0, 0.0, 0.0, 0, 0, 0])
    for work_h, deadline_h in args.job_list:
        for idle in args.idle:
            job = SimJob(work_s=work_h * 3600, deadline_s=deadline_h * 3600, modes=(Mode(1.0, 1000.0),),
                         resume_overhead_s=300.0, waiting_power_w=1000.0 * idle)
            label = f"{work_h:g}h/{deadline_h:g}h @ idle {idle:g}"
            for start in starts_for(trace, args.every_days, deadline_h):
                now_g = run_now(trace, start, job).emissions_g
                best_g = oracle(trace, start, job).emissions_g
                for column, forecaster in forecasters.items():
                    for gate in (True, False) if args.gate_off else (True,):
                        # gate off: the engine's wait gate bypassed, its deadline guard kept (what the gate costs)
                        run = (simulate_run(trace, start, job, policy, forecaster) if gate
                               else simulate_run(trace, start, job, policy, forecaster, wait_gate=False))
                        row = totals[(label, column if gate else f"{column} gate off")]
                        row[0] += run.ledger.emissions_g
                        row[1] += now_g
                        row[2] += best_g
                        row[3] += run.ledger.emissions_g > now_g + 1e-9
                        row[4] += run.ledger.finished_at is None or run.ledger.finished_at > run.deadline
                        row[5] += 1
    if own.computed:
        save_own_table(path, own.table, args.cache)
    fallback = {k: f.fallback_hours for k, f in forecasters.items() if isinstance(f, ArchiveForecaster)}
    return totals, {"mape_24h": measured, "fallback_hours": fallback}


def fraction(row: list) -> float:
    return (row[1] - row[0]) / (row[1] - row[2]) if row[1] - row[2] > 1e-9 else float("nan")


def cells(totals: dict) -> dict[str, dict]:
    """Per "job|column": fraction of the oracle's saving, runs worse than run-now, deadlines missed, runs, and
    the oracle's saving over run-now (what the tables print; ``--json`` writes it, ``--merge`` reads it)."""
    return {f"{job}|{column}": {"fraction": fraction(row), "worse": row[3], "missed": row[4], "runs": row[5],
                                "oracle_saving": (row[1] - row[2]) / row[1]}
            for (job, column), row in totals.items()}


def _pooled(per_trace: dict[str, dict[str, dict]], key: str) -> float:
    """Σ fraction × oracle saving ÷ Σ oracle saving over traces: the saving pooled, flat grids weighed less."""
    weights = [t[key]["oracle_saving"] for t in per_trace.values()]
    return sum(t[key]["fraction"] * w for t, w in zip(per_trace.values(), weights)) / sum(weights)


def print_tables(per_trace: dict[str, dict[str, dict]], columns: list[str]) -> None:
    """The markdown tables of docs/benchmarks.md from ``cells`` per trace."""
    jobs = sorted({k.split("|")[0] for c in per_trace.values() for k in c},
                  key=lambda j: (float(j.split("h")[0]), -float(j.split()[-1])))
    for job in jobs:
        print(f"\n##### job {job}: net saving vs run-now as a fraction of the idle-aware oracle's "
              "(runs worse than run-now)\n")
        header = ["trace", "oracle saving"] + [f"{POLICY} ({c})" for c in columns]
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        means: dict[str, list[float]] = defaultdict(list)
        big_min: dict[str, float] = {}
        small_min: dict[str, float] = {}
        for trace, cell in per_trace.items():
            oracle_saving = cell[f"{job}|{columns[0]}"]["oracle_saving"]
            row_cells = [trace, f"{oracle_saving:.1%}"]
            for column in columns:
                c = cell[f"{job}|{column}"]
                means[column].append(c["fraction"])
                bucket = big_min if oracle_saving >= SMALL_ORACLE_SAVING else small_min
                bucket[column] = min(bucket.get(column, float("inf")), c["fraction"])
                missed = f", {c['missed']} missed" if c["missed"] else ""
                row_cells.append(f"{c['fraction']:.3f} ({c['worse']}{missed})")
            print("| " + " | ".join(row_cells) + " |")
        worse = {c: sum(t[f"{job}|{c}"]["worse"] for t in per_trace.values()) for c in columns}
        print("| " + " | ".join(["**mean**", ""] + [f"**{statistics.fmean(means[c]):.3f}** (min {min(means[c]):.3f};"
                                                     f" {worse[c]} worse)" for c in columns]) + " |")
        big = [t for t in per_trace.values() if t[f"{job}|{columns[0]}"]["oracle_saving"] >= SMALL_ORACLE_SAVING]
        if big:
            print("| " + " | ".join(["mean, oracle saves ≥ 5 %", ""] + [
                f"{statistics.fmean(t[f'{job}|{c}']['fraction'] for t in big):.3f}" for c in columns]) + " |")
        print("| " + " | ".join(["pooled", ""] + [f"{_pooled(per_trace, f'{job}|{c}'):.3f}" for c in columns]) + " |")
        for label, bucket in (("min, oracle saves ≥ 5 %", big_min), ("min, oracle saves < 5 %", small_min)):
            if bucket:
                print("| " + " | ".join([label, ""] + [f"{bucket[c]:.3f}" for c in columns]) + " |")
        runs = sum(t[f"{job}|{columns[0]}"]["runs"] for t in per_trace.values())
        missed = {c: sum(t[f"{job}|{c}"]["missed"] for t in per_trace.values()) for c in columns}
        print(f"\nruns per column: {runs}; deadlines missed: " + ", ".join(f"{c} {m}" for c, m in missed.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="folder for greentrain's own forecasts (.npy)")
    parser.add_argument("--archive-dir", type=Path, help="folder for the synthetic archives")
    parser.add_argument("--every-days", type=float, default=15.0)
    parser.add_argument("--idle", nargs="*", type=float, default=[0.15, 0.0])
    parser.add_argument("--jobs", nargs="*", choices=["8", "24"], default=["8", "24"])
    parser.add_argument("--scales", nargs="*", type=float, default=[0.5, 1.0, 2.0])
    parser.add_argument("--modes", nargs="*", choices=["latest", "skill"], default=["latest", "skill"])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--gate-off", action="store_true",
                        help="also replay each column with the engine's wait gate off (deadline guard kept)")
    parser.add_argument("--traces", nargs="*", help="CSV files (default: every file in ../shared/data/carbon)")
    parser.add_argument("--json", type=Path, help="also write the per-trace results here")
    parser.add_argument("--merge", nargs="*", type=Path, help="print the tables of earlier --json files instead")
    args = parser.parse_args()
    columns = ["trace-only"] + [f"{m} {s:g}x" for s in args.scales for m in args.modes]
    if args.gate_off:
        columns = [c for column in columns for c in (column, f"{column} gate off")]
    if args.merge:
        per_trace = {}
        for path in args.merge:
            per_trace.update(json.loads(path.read_text())["traces"])
        # The columns the files hold (in every trace), not the flags' defaults: a run with --modes skill has no
        # "latest" column to print.
        first = next(iter(per_trace.values()), {})
        held = dict.fromkeys(key.split("|", 1)[1] for key in first)
        columns = [c for c in held if all(any(k.endswith(f"|{c}") for k in t) for t in per_trace.values())]
        print_tables(dict(sorted(per_trace.items())), columns)
        return
    if args.cache is None or args.archive_dir is None:
        parser.error("--cache and --archive-dir are required (unless --merge)")
    args.job_list = [(8.0, 24.0) if j == "8" else (24.0, 72.0) for j in args.jobs]
    paths = [Path(p) for p in args.traces] if args.traces else sorted(DATA.glob("*.csv"))
    t0 = time.perf_counter()
    per_trace, notes = {}, {}
    for path in paths:
        name = path.stem.removesuffix("_hourly")
        totals, notes[name] = evaluate(path, args)
        per_trace[name] = cells(totals)
        print(f"# {path.name} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps({"traces": per_trace, "notes": notes}, indent=1))
    print_tables(per_trace, columns)
    print("\narchive MAPE 24 h ahead, as generated (seed %d):" % args.seed)
    for name, note in notes.items():
        if note["mape_24h"]:
            print(f"- {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in note["mape_24h"].items()))
    gaps = sum(sum(n["fallback_hours"].values()) for n in notes.values())
    print(f"\nhours on the trace-only forecaster for an archive gap: {gaps}")
    print(f"forecaster source sha256 {_source_version()}; wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
