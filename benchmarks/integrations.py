"""Integrations benchmark: what `greentrain submit` saves on real traces, and what the callbacks cost.

1. submit: for every day of each 2022 trace in ../shared/data/carbon, a job
   submitted at HH:00 UTC with a running-time estimate and a deadline is
   planned with ``best_window`` on (a) the project's causal forecaster fed the
   trace up to the submission hour ("real") and (b) the trace itself
   ("perfect"); both are scored on the *actual* trace against starting now.
2. overhead: the same tiny HF Trainer and Lightning runs with and without the
   GreenTrainCallback (run-now policy, no devices), side by side, as a ratio of
   wall time per step.
3. planner latency: one ``best_window`` over a 72 h forecast.

Usage: python benchmarks/integrations.py [--steps 200] [--hour 9] [--estimate-h 4] [--deadline-h 24]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from greentrain.integrations.placement import best_window, window_mean  # noqa: E402
from greentrain.signals.forecast.forecaster import Forecaster  # noqa: E402
from greentrain.signals.trace import load_trace  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "carbon"


def submit_savings(path: Path, hour: int, estimate_h: float, deadline_h: float) -> tuple[float, float, int]:
    """Mean relative reduction of window intensity vs start-now: (real forecast, perfect forecast, n)."""
    points = load_trace(path)
    forecaster = Forecaster()
    duration_s = estimate_h * 3600.0
    real, perfect = [], []
    for index, point in enumerate(points):
        if point.start.hour != hour or index < 28 * 24 or index + deadline_h + 1 >= len(points):
            continue
        now = point.start
        deadline = now + timedelta(hours=deadline_h)
        baseline = window_mean(points, now, now + timedelta(seconds=duration_s)).mean_intensity_g_per_kwh
        forecast = [point, *forecaster.forecast(points[: index + 1], now, horizon_h=int(deadline_h) + 1)]
        for plan_on, out in ((forecast, real), (points[index: index + int(deadline_h) + 2], perfect)):
            window = best_window(plan_on, now=now, deadline=deadline, duration_s=duration_s)
            actual = window_mean(points, window.start, window.end).mean_intensity_g_per_kwh
            out.append(1.0 - actual / baseline if baseline else 0.0)
    return statistics.fmean(real), statistics.fmean(perfect), len(real)


def hf_step_ratio(steps: int, pairs: int) -> float:
    import transformers

    from greentrain.integrations.hf import GreenTrainCallback

    def run(callbacks: list) -> float:
        import torch

        transformers.set_seed(0)
        config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                                         bos_token_id=0, eos_token_id=0)
        ids = torch.randint(0, 64, (steps * 4, 16), generator=torch.Generator().manual_seed(0))
        data = [{"input_ids": row, "labels": row} for row in ids]
        args = transformers.TrainingArguments(output_dir="/tmp/gt-bench-hf", max_steps=steps, report_to=[],
                                              per_device_train_batch_size=4, save_strategy="no",
                                              logging_strategy="no", use_cpu=True, disable_tqdm=True)
        trainer = transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=data,
                                       callbacks=callbacks)
        start = time.perf_counter()
        trainer.train()
        return (time.perf_counter() - start) / steps

    run([])  # warm-up: imports, allocator, policy loading on both sides
    run([GreenTrainCallback(policy="run-now", devices=False, progress=False)])
    ratios = []
    for _ in range(pairs):  # alternate, so load from other processes hits both sides alike
        plain = run([])
        green = run([GreenTrainCallback(policy="run-now", devices=False, progress=False)])
        ratios.append(green / plain)
    return statistics.median(ratios)


def engine_costs() -> tuple[float, float]:
    """(per-step cost of step_begin + step_end in µs, start cost of a callback's engine in ms)."""
    from greentrain.integrations.driver import StepDriver, callback_job

    opens = []
    for _ in range(3):
        start = time.perf_counter()
        driver = StepDriver(*callback_job(policy="run-now", devices=False, progress=False))
        driver.open(steps_total=100_000, steps_done=0)
        opens.append(time.perf_counter() - start)
        driver.close()
    driver = StepDriver(*callback_job(policy="run-now", devices=False, progress=False))
    driver.open(steps_total=100_000, steps_done=0)
    start = time.perf_counter()
    for _ in range(5000):
        driver.step_begin()
        driver.step_end()
    per_step_us = (time.perf_counter() - start) / 5000 * 1e6
    driver.close()
    return per_step_us, min(opens[1:]) * 1000


def planner_latency_ms() -> float:
    points = load_trace(DATA / "GB_2022_hourly.csv")[1000:1073]
    now = points[0].start
    start = time.perf_counter()
    for _ in range(20):
        best_window(points, now=now, deadline=now + timedelta(hours=72), duration_s=8 * 3600)
    return (time.perf_counter() - start) / 20 * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=5, help="alternating with/without runs (median ratio)")
    parser.add_argument("--hour", type=int, default=9)
    parser.add_argument("--estimate-h", type=float, default=4.0)
    parser.add_argument("--deadline-h", type=float, default=24.0)
    args = parser.parse_args(argv)
    print(f"submit: {args.estimate_h:g} h job submitted daily at {args.hour:02d}:00 UTC, "
          f"deadline +{args.deadline_h:g} h")
    print("| trace | submissions | reduction vs start-now (real forecast) | (perfect forecast) |")
    print("|---|---|---|---|")
    for path in sorted(DATA.glob("*_2022_hourly.csv")):
        real, perfect, n = submit_savings(path, args.hour, args.estimate_h, args.deadline_h)
        print(f"| {path.stem} | {n} | {real:.1%} | {perfect:.1%} |")
    print(f"\nplanner: best_window over a 72 h forecast, 8 h job: {planner_latency_ms():.2f} ms")
    per_step_us, open_ms = engine_costs()
    print(f"engine per step (step_begin + step_end, run-now, no devices): {per_step_us:.0f} µs; "
          f"engine start: {open_ms:.0f} ms")
    ratio = hf_step_ratio(args.steps, args.pairs)
    print(f"HF Trainer wall time per step, with / without GreenTrainCallback: {ratio:.3f} "
          f"(median of {args.pairs} alternating pairs, {args.steps} steps each)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
