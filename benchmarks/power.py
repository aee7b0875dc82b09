"""Power-actuation benchmarks, side by side as ratios in one run.

    OMP_NUM_THREADS=1 python benchmarks/power.py

1. Cost of a journaled, locked change (ActuatorSet.apply) vs. a bare device call.
2. Daemon round trip (Unix socket) vs. a direct journaled change.
3. Profiler: energy and time at the profiled optimum vs. the default (max) limit,
   on every measured workload (Zeus profiles, fake GPU); steps the sweep costs.
4. Stage clocks: energy saved and iteration time added, 4-stage 1F1B pipeline.
5. Precision: measured CPU step time of fp32 / bf16 / fp16 autocast (why we measure, not assume).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from greentrain.actuators import ActuatorSet
from greentrain.testing import FileBackedGPU
from greentrain.daemon.client import DaemonClient
from greentrain.daemon.config import DaemonConfig
from greentrain.daemon.server import DaemonServer
from greentrain.device.profiles import BUILTIN_GPUS, load_gpu_profile
from greentrain.policies.base import Decision
from greentrain.profiler import LocalCollective, OperatingPointProfiler, energy_optimal
from greentrain.stageclocks import StageTimer, plan_stage_clocks, profile_stage
from greentrain.testing import FakeGPU


def _per_call_us(fn, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - start) / n * 1e6


def bench_actuation(tmp: Path) -> None:
    gpu = FakeGPU("a40")
    direct = _per_call_us(lambda i: gpu.set_power_limit_w(200.0 if i % 2 else 250.0), 2000)
    with ActuatorSet([gpu], state_dir=tmp / "act", install_hooks=False) as acts:
        journaled = _per_call_us(lambda i: acts.apply(Decision(power_limit_w=200.0 if i % 2 else 250.0)), 2000)
        first = _per_call_us(lambda i: (acts.restore_all(), acts.apply(Decision(power_limit_w=200.0))), 200)
    print("## 1. actuation overhead (fake GPU; real NVML set calls take ~ms)")
    print(f"direct set_power_limit_w      {direct:8.1f} us/call")
    print(f"ActuatorSet.apply (journaled) {journaled:8.1f} us/call  ratio {journaled / direct:6.1f}x")
    print(f"restore + first change (fsync){first:8.1f} us/pair")


def bench_daemon(tmp: Path) -> None:
    sockdir = Path(tempfile.mkdtemp(prefix="gt-bench-"))
    gpus = [FileBackedGPU(tmp / "d-gpu.json", "a40")]
    server = DaemonServer(gpus, DaemonConfig(socket=sockdir / "d.sock", state_dir=tmp / "dstate"))
    server.start()
    try:
        with DaemonClient(sockdir / "d.sock") as client:
            via = _per_call_us(lambda i: client.set_power_limit_w(gpus[0].uuid, 200.0 if i % 2 else 250.0), 500)
        local = [FileBackedGPU(tmp / "l-gpu.json", "a40")]
        with ActuatorSet(local, state_dir=tmp / "lstate", install_hooks=False) as acts:
            direct = _per_call_us(lambda i: acts.apply(Decision(power_limit_w=200.0 if i % 2 else 250.0)), 500)
    finally:
        server.shutdown()
        shutil.rmtree(sockdir, ignore_errors=True)
    print("\n## 2. daemon round trip (file-backed fake GPU)")
    print(f"direct journaled change  {direct:8.1f} us")
    print(f"via greentrain daemon    {via:8.1f} us  ratio {via / direct:5.2f}x")


def bench_profiler(tmp: Path) -> None:
    print("\n## 3. profiler on measured profiles: optimum vs default (max) limit")
    print("gpu      workload                          limit W  energy  time   sweep steps")
    savings = []
    for model in BUILTIN_GPUS:
        for workload in load_gpu_profile(model).workloads():
            now = [0.0]
            gpu = FakeGPU(model, workload, time_fn=lambda: now[0])
            with ActuatorSet([gpu], state_dir=tmp / "prof", install_hooks=False) as acts:
                prof = OperatingPointProfiler([gpu], acts, time_fn=lambda: now[0], collective=LocalCollective())
                steps = 0
                while not prof.done:
                    prof.before_step()
                    now[0] += gpu.step_time_s(1.0)
                    prof.after_step()
                    steps += 1
            points = prof.result()
            best, top = energy_optimal(points), points[0]
            energy = (best.power_w / best.relative_speed) / (top.power_w / top.relative_speed)
            savings.append(1 - energy)
            print(f"{model:8} {workload:33} {best.power_limit_w:7.0f}  {energy:6.3f}  {1 / best.relative_speed:5.3f}  {steps:5d}")
    print(f"median energy saving at the optimum: {statistics.median(savings):.1%} (ratios are optimum / max limit)")


def bench_stage_clocks(tmp: Path) -> None:
    print("\n## 4. stage clocks, 4-stage 1F1B, forward 10/14/11/8 ms, backward 2x, 1% bound")
    clocks = list(range(1740, 599, -60))
    for microbatches in (8, 16, 32):
        now = [0.0]
        gpus = [FileBackedGPU(tmp / f"sc{microbatches}-{s}.json", "a40", index=s, time_fn=lambda: now[0]) for s in range(4)]
        profiles = []
        for gpu, fwd in zip(gpus, (0.010, 0.014, 0.011, 0.008)):
            def run(timer: StageTimer, gpu=gpu, fwd=fwd) -> None:
                with timer.forward():
                    now[0] += gpu.step_time_s(fwd)
                with timer.backward():
                    now[0] += gpu.step_time_s(2 * fwd)
            with ActuatorSet([gpu], state_dir=tmp / "sc", install_hooks=False) as acts:
                profiles.append(profile_stage(gpu, acts, clocks, run, idle_power_w=60.0, time_fn=lambda: now[0]))
        plan = plan_stage_clocks(profiles, microbatches, tolerance=0.01)
        print(f"M={microbatches:3d}: clocks {plan.clocks_mhz}  energy x{1 - plan.energy_saving:.3f}  "
              f"time x{1 + plan.slowdown:.4f}")


def bench_precision() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
    x = torch.randn(256, 512)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    results = {}
    for name, dtype in (("fp32", None), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
        times = []
        for i in range(25):
            start = time.perf_counter()
            ctx = torch.autocast("cpu", dtype=dtype) if dtype else torch.autocast("cpu", enabled=False)
            with ctx:
                loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            if i >= 5:
                times.append(time.perf_counter() - start)
        results[name] = statistics.median(times)
    print("\n## 5. CPU step time by precision (MLP 512-1024-512, batch 256, 1 thread)")
    for name, t in results.items():
        print(f"{name}: {t * 1e3:7.2f} ms/step  ratio to fp32 {t / results['fp32']:5.2f}")


def main() -> None:
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="gt-bench-state-"))
    try:
        bench_actuation(tmp)
        bench_daemon(tmp)
        bench_profiler(tmp)
        bench_stage_clocks(tmp)
        bench_precision()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
