"""The measurements of ``gpu_acceptance.py``; each reads NVML and never calls a setter.

Every section returns a dict (or ``{"error": ...}`` when it could not run), so one failing section leaves the
others' figures intact. ``energy_accuracy`` and ``nvml_call_costs`` take the GPU object and the load as
arguments, so they also run on the pynvml double in tests; the rest need CUDA.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["run_sections", "energy_accuracy", "nvml_call_costs", "mixed_load"]

POLL_S = 0.002
"""Instant-power polling period of the reference integral (the H100 measurements polled at 2 ms)."""


def run_sections(args: argparse.Namespace) -> dict[str, Any]:
    """Each requested section, guarded: an exception becomes that section's error, the others still run."""
    from greentrain.device import discover

    devices = discover(rapl_root=None, estimate_cpu=False)
    if not devices.gpus:
        return {"error": "CUDA is available but NVML found no GPU: " + "; ".join(devices.notes)}
    gpu = devices.gpus[0]
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "energy": lambda: energy_accuracy(gpu, mixed_load(args.load_s)),
        "calls": lambda: nvml_call_costs(gpu, args.calls),
        "session": lambda: session_overhead(args),
        "precision": lambda: energy_by_precision(gpu, args),
        "runtime": lambda: runtime_vs_compiled(args),
    }
    out: dict[str, Any] = {"nvml_gpu": {"index": gpu.index, "name": gpu.name, "uuid": gpu.uuid}}
    with devices:
        for name in args.sections:
            try:
                out[name] = runners[name]()
            except Exception as e:  # report, keep measuring the rest
                out[name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=3)}
    return out


# -- monitor energy vs counter vs integrated instant power ----------------------------------------------------

def mixed_load(seconds: float) -> Callable[[], list[str]]:
    """Phases of heavy bf16 matmuls, 50 % duty, small matmuls and idle, repeated to fill ``seconds``."""
    import torch

    def run() -> list[str]:
        big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        small = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        phase_s = max(seconds / 8, 0.5)
        phases: list[str] = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for name in ("heavy", "duty50", "small", "idle"):
                stop = min(end, time.perf_counter() + phase_s)
                phases.append(name)
                while time.perf_counter() < stop:
                    if name == "heavy":
                        big @ big
                        torch.cuda.synchronize()
                    elif name == "small":
                        small @ small
                        torch.cuda.synchronize()
                    elif name == "duty50":
                        work_end = time.perf_counter() + 0.05
                        while time.perf_counter() < work_end:
                            big @ big
                            torch.cuda.synchronize()
                        time.sleep(0.05)
                    else:
                        time.sleep(0.05)
        return phases

    return run


def energy_accuracy(gpu: Any, load: Callable[[], Any], interval_s: float = 0.1) -> dict[str, Any]:
    """One window: the Monitor's energy vs the counter delta vs trapezoid-integrated instant power."""
    from greentrain.monitor import Monitor

    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            samples.append((time.perf_counter(), gpu.power_w()))
            time.sleep(POLL_S)

    poller = threading.Thread(target=poll, name="acceptance-poll", daemon=True)
    with Monitor([gpu], [], interval_s=interval_s) as monitor:
        poller.start()
        time.sleep(0.3)  # the poller is running before the window opens
        counter0, t0 = gpu.total_energy_j(), time.perf_counter()
        monitor.begin("acceptance")
        phases = load()
        window = monitor.end("acceptance")
        counter1, t1 = gpu.total_energy_j(), time.perf_counter()
        time.sleep(0.3)
        stop.set()
        poller.join()
    inside = [(t, w) for t, w in samples if t0 - POLL_S <= t <= t1 + POLL_S]
    integrated = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(inside, inside[1:]))
    counter = counter1 - counter0
    gaps = [b[0] - a[0] for a, b in zip(inside, inside[1:])]
    return {"window_s": t1 - t0, "counter_j": counter, "integrated_j": integrated, "monitor_j": window.energy_j,
            "monitor_source": str(window.source), "monitor_window_s": window.duration_s,
            "monitor_vs_counter_pct": _pct(window.energy_j, counter),
            "monitor_vs_integrated_pct": _pct(window.energy_j, integrated),
            "counter_vs_integrated_pct": _pct(counter, integrated),
            "poll_samples": len(inside), "poll_median_interval_ms": statistics.median(gaps) * 1000 if gaps else None,
            "phases": sorted(set(phases or []))}


def _pct(value: float, reference: float) -> float | None:
    return (value / reference - 1) * 100 if reference else None


# -- NVML call costs -------------------------------------------------------------------------------------------

def nvml_call_costs(gpu: Any, calls: int, nvml: Any = None) -> dict[str, Any]:
    """CPU (this thread) and wall time per call of the getters the monitor uses, and of one sampling pass.

    The getters are called on pynvml itself (``nvml``: the module, loaded when None), on the GPU's own handle:
    only getters, nothing is set.
    """
    from greentrain.device.nvml import load_pynvml
    from greentrain.monitor import Monitor

    nvml = nvml or load_pynvml()
    handle = nvml.nvmlDeviceGetHandleByIndex(gpu.index)
    getters: list[tuple[str, Callable[[], Any]]] = [
        ("nvmlDeviceGetTotalEnergyConsumption", lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle)),
        ("nvmlDeviceGetFieldValues(POWER_INSTANT)",
         lambda: nvml.nvmlDeviceGetFieldValues(handle, [nvml.NVML_FI_DEV_POWER_INSTANT])),
        ("nvmlDeviceGetPowerUsage", lambda: nvml.nvmlDeviceGetPowerUsage(handle)),
        ("nvmlDeviceGetEnforcedPowerLimit", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle)),
        ("nvmlDeviceGetClockInfo(SM)", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
    ]
    rows = [_timed_calls(name, fn, calls) for name, fn in getters]
    with Monitor([gpu], [], interval_s=3600.0) as monitor:  # the thread sleeps: we time the pass ourselves
        rows.append(_timed_calls("greentrain Monitor sampling pass (1 GPU)", monitor.sample, max(1, calls // 10)))
    return {"calls": calls, "rows": rows}


def _timed_calls(name: str, fn: Callable[[], Any], calls: int) -> dict[str, Any]:
    fn()  # first call may initialise driver state
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for _ in range(calls):
        fn()
    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    return {"call": name, "cpu_us": cpu / calls * 1e6, "wall_us": wall / calls * 1e6, "n": calls}


# -- model, loops ----------------------------------------------------------------------------------------------

def _sync(args: argparse.Namespace) -> None:
    import torch

    if getattr(args, "device", "cuda") == "cuda":
        torch.cuda.synchronize()


def _model(args: argparse.Namespace, compile: bool = False) -> tuple[Any, Any, Callable[..., Any]]:
    import torch

    from greentrain.runtime.builder import cross_entropy
    from greentrain.runtime.config import ModelConfig
    from greentrain.runtime.model import Transformer, init_weights

    cfg = ModelConfig(dim=args.dim, n_layers=args.layers, n_heads=args.heads, max_seq_len=args.seq_len)
    device = torch.device(getattr(args, "device", "cuda"))
    model = Transformer(cfg).to(device)
    init_weights(model, cfg, 0, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    net = torch.compile(model) if compile else model
    tokens = torch.randint(0, cfg.vocab_size, (args.batch, args.seq_len + 1), device=device)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step(dtype: Any = torch.bfloat16) -> Any:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


def session_overhead(args: argparse.Namespace) -> dict[str, Any]:
    """Rounds of bare / Session / bare (A/A) blocks in rotating order; ms per step of the steps alone."""
    import httpx

    from greentrain.session import Session

    _model_, _opt, step = _model(args)
    for _ in range(3):
        step()
    _sync(args)
    tokens = args.batch * args.seq_len

    def bare() -> float:
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        _sync(args)
        return (time.perf_counter() - t0) / args.steps

    def under_session() -> float:
        with Session("carbon-aware", zone="GB", provider="static", actuation="advise", metrics_port=0,
                     decide_interval_s=1, relaunch="none", pause_mode="suspend", progress=False,
                     steps_total=10**9, job="acceptance") as session:
            stop = threading.Event()
            url = f"http://127.0.0.1:{session.metrics.port}/metrics"

            def scrape() -> None:  # Prometheus at 1 Hz, as in production
                while not stop.wait(1.0):
                    httpx.get(url, timeout=5)

            scraper = threading.Thread(target=scrape, daemon=True)
            scraper.start()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                session.step(tokens=tokens, loss=step())
            _sync(args)
            elapsed = (time.perf_counter() - t0) / args.steps
            stop.set()
            scraper.join()
        return elapsed

    blocks: dict[str, list[float]] = {"bare": [], "session": [], "bare_aa": []}
    order = [("bare", bare), ("session", under_session), ("bare_aa", bare)]
    for i in range(args.rounds):
        for name, fn in order[i % 3:] + order[:i % 3]:
            blocks[name].append(fn())
    ratios = [s / b for s, b in zip(blocks["session"], blocks["bare"])]
    aa = [a / b for a, b in zip(blocks["bare_aa"], blocks["bare"])]
    return {"rounds": args.rounds, "steps": args.steps, "bare_ms_per_step": statistics.median(blocks["bare"]) * 1e3,
            "session_ms_per_step": statistics.median(blocks["session"]) * 1e3,
            "ratio_median": statistics.median(ratios), "aa_ratio_median": statistics.median(aa), "blocks": blocks}


def energy_by_precision(gpu: Any, args: argparse.Namespace) -> dict[str, Any]:
    """J/step from the NVML counter over at least ``steps`` steps and ``min_block_s`` per precision."""
    import torch

    _model_, _opt, step = _model(args)
    rows = []
    for name, dtype, tf32 in (("fp32", None, False), ("tf32", None, True), ("bf16", torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        for _ in range(3):
            step(dtype)
        _sync(args)
        e0, t0 = gpu.total_energy_j(), time.perf_counter()
        steps = 0
        while steps < args.steps or time.perf_counter() - t0 < args.min_block_s:  # many counter refreshes
            step(dtype)
            steps += 1
            if steps % 10 == 0:
                _sync(args)
        _sync(args)
        e1, t1 = gpu.total_energy_j(), time.perf_counter()
        rows.append({"precision": name, "steps": steps, "j_per_step": (e1 - e0) / steps,
                     "ms_per_step": (t1 - t0) / steps * 1e3, "mean_w": (e1 - e0) / (t1 - t0),
                     "block_s": t1 - t0})
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"steps": args.steps, "rows": rows,
            "note": "counter refreshes every 100 ms: blocks shorter than ~5 s carry a few % of read-out error"}


def runtime_vs_compiled(args: argparse.Namespace) -> dict[str, Any]:
    """The Trainer's real loop (``fit``: deferred metrics, prefetch) vs torch.compile(model) with fused AdamW,
    the same batches and the same clipping, interleaved (runtime_device's comparison, Hugging Face left out).

    ``Trainer.train_step`` is not what is timed: it reads each step's metrics at once, a host sync per step
    that a training loop does not pay (it cost 8 % at 27 ms steps on an H200, 2026-11-27)."""
    from runtime_device import run_device_comparison

    from greentrain.runtime.config import config_from_dict

    cfg = config_from_dict({
        "model": {"dim": args.dim, "n_layers": args.layers, "n_heads": args.heads, "max_seq_len": args.seq_len},
        "train": {"steps": 10**6, "global_batch": args.batch, "seq_len": args.seq_len, "device": args.device,
                  "dtype": "bf16", "compile": True, "warmup_steps": 0, "decay": "constant", "lr": 1e-4},
        "data": {"max_bytes": 2_000_000}, "parallel": {"dp_shard": 1},
    }, origin="gpu_acceptance")
    rows = run_device_comparison(cfg, steps=args.steps, rounds=args.rounds, warmup=3, with_hf=False,
                                 log=lambda line: print(f"gpu_acceptance: runtime: {line}", file=sys.stderr))
    rt, pc = rows["trainer"]["tokens_per_s"], rows["plain"]["tokens_per_s"]
    return {"shape": f"d={args.dim}, {args.layers} layers, {args.heads} heads, batch {args.batch}×{args.seq_len}",
            "runtime_tokens_per_s": rt, "compiled_tokens_per_s": pc, "ratio": rt / pc, "rounds": args.rounds,
            "steps": args.steps, "mfu": rows["trainer"]["mfu"], "plain_mfu": rows["plain"]["mfu"]}
