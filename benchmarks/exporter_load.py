"""Exporter under load: 100 concurrent scrapers on loopback while a CPU training loop runs.

Measures, side by side in one run, the training step time with no scrapers,
with 100 scrapers each scraping every second (a fleet of Prometheus servers
at their shortest sensible interval), and with 100 scrapers scraping back to
back (worst case). Scrapers run in a separate process, as Prometheus does, so
only the exporter's own cost lands in the training process. Reports scrape
errors and the step-time ratios.

    OMP_NUM_THREADS=1 python benchmarks/exporter_load.py [--seconds 6] [--scrapers 100] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import threading
import time
import urllib.request

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from greentrain.exporters import MetricsServer
from greentrain.jobstats import JobState, JobStats
from greentrain.monitor import Monitor
from greentrain.testing import FakeCPUDomain, FakeGPU


def _scraper_process(url: str, scrapers: int, seconds: float, interval_s: float, out: mp.Queue) -> None:
    counts = {"ok": 0, "errors": 0, "bytes": 0}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def scrape() -> None:
        while time.monotonic() < stop_at:
            started = time.monotonic()
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    body = r.read()
                ok = r.status == 200 and b"greentrain_training_steps_total" in body
            except OSError:
                ok, body = False, b""
            with lock:
                counts["ok" if ok else "errors"] += 1
                counts["bytes"] += len(body)
            if interval_s:
                time.sleep(max(0.0, interval_s - (time.monotonic() - started)))

    threads = [threading.Thread(target=scrape) for _ in range(scrapers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(counts)


def _train_steps(seconds: float, stats: JobStats) -> list[float]:
    """A small MLP training loop on CPU; returns each step's wall time in seconds."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 512), torch.randn(64, 512)
    times = []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        stats.add(steps=1, tokens=64, energy_j=1.0, emissions_g=0.0001)
    return times


def _phase(name: str, url: str, stats: JobStats, seconds: float, scrapers: int, interval_s: float | None) -> dict:
    proc, queue = None, mp.Queue()
    if interval_s is not None:
        proc = mp.Process(target=_scraper_process, args=(url, scrapers, seconds, interval_s, queue))
        proc.start()
        time.sleep(0.5)  # let all scrapers connect before timing steps
    times = _train_steps(seconds, stats)
    counts = {"ok": 0, "errors": 0, "bytes": 0}
    if proc is not None:
        counts = queue.get(timeout=seconds + 30)
        proc.join(timeout=30)
    return {"phase": name, "steps": len(times), "median_step_ms": statistics.median(times) * 1e3,
            "p95_step_ms": statistics.quantiles(times, n=20)[18] * 1e3, **counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="duration of each phase")
    parser.add_argument("--scrapers", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved repetitions of the three phases")
    args = parser.parse_args()
    torch.set_num_threads(1)
    gpus = [FakeGPU("a40", index=i) for i in range(4)]
    monitor = Monitor(gpus, [FakeCPUDomain()], interval_s=0.1).start()
    stats = JobStats(job="bench", state=JobState.RUNNING)
    with MetricsServer(job="bench", monitor=monitor, job_stats=stats) as server:
        t0 = time.perf_counter()
        for _ in range(200):
            page = server.render()
        render_ms = (time.perf_counter() - t0) / 200 * 1e3
        print(f"one uncached render: {render_ms:.3f} ms, {len(page)} bytes (4 GPUs, 1 CPU package, job series)")
        rows = []
        for round_no in range(1, args.rounds + 1):  # interleaved, so drifting machine load hits every phase
            for label, interval_s in (("no scrapers", None), (f"{args.scrapers} scrapers @ 1 s", 1.0),
                                      (f"{args.scrapers} scrapers back to back", 0.0)):
                rows.append(_phase(f"{label} (round {round_no})", server.url, stats, args.seconds, args.scrapers,
                                   interval_s))
    monitor.stop()
    base = statistics.median([r["median_step_ms"] for r in rows if r["phase"].startswith("no scrapers")])
    print(f"{'phase':42} {'steps':>6} {'median ms':>10} {'p95 ms':>8} {'ratio':>6} {'scrapes':>8} {'errors':>6}")
    for row in rows:
        row["ratio_vs_baseline"] = row["median_step_ms"] / base
        print(f"{row['phase']:42} {row['steps']:6d} {row['median_step_ms']:10.3f} {row['p95_step_ms']:8.3f} "
              f"{row['ratio_vs_baseline']:6.3f} {row['ok']:8d} {row['errors']:6d}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
