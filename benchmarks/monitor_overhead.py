"""Monitor overhead: a small CPU transformer trained bare vs. under the monitor, interleaved in one run.

    OMP_NUM_THREADS=1 python benchmarks/monitor_overhead.py [--blocks 12] [--steps 25] [--fake-gpus 8]

Blocks of training steps alternate bare / monitored (sampling at 0.1 s, with
``step_begin``/``step_end`` on every step, over the devices ``discover()``
finds plus N fake GPUs), so drifts in machine load hit both sides alike.
Reports the median step time of each side and their ratio (target <= 1.005),
then the cost of one sampling pass over 8 fake GPUs (``FakeGPU`` and
``NVMLGPU`` over the pynvml double).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from greentrain.device import discover
from greentrain.monitor import Monitor
from greentrain.testing import FakeGPU


def make_model() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
    model = nn.Sequential(nn.Embedding(1000, 128), nn.TransformerEncoder(layer, num_layers=3), nn.Linear(128, 1000))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 1000, (16, 64))
    return model, opt, tokens, torch.roll(tokens, -1, dims=1)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()


def run_block(steps: int, monitor: Monitor | None, parts: tuple) -> list[float]:  # type: ignore[type-arg]
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        if monitor is not None:
            monitor.step_begin()
        train_step(*parts)
        if monitor is not None:
            monitor.step_end()
        times.append(time.perf_counter() - t0)
    return times


def overhead(blocks: int, steps: int, fake_gpus: int) -> tuple[float, float, int]:
    parts = make_model()
    run_block(5, None, parts)  # warm-up
    devices = discover()
    gpus = list(devices.gpus) + [FakeGPU("a40", index=100 + i) for i in range(fake_gpus)]
    bare: list[float] = []
    monitored: list[float] = []
    samples = 0
    for block in range(2 * blocks):
        if block % 2 == 0:
            bare += run_block(steps, None, parts)
            continue
        monitor = Monitor(gpus, devices.cpus, interval_s=0.1).start()
        monitored += run_block(steps, monitor, parts)
        monitor.stop()
        samples += 1
    devices.close()
    return statistics.median(bare), statistics.median(monitored), len(gpus)


def sampling_pass_us(passes: int = 2000) -> dict[str, float]:
    from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

    out = {}
    nvml = FakeNVML([FakeNVMLDevice("a40") for _ in range(8)])
    variants = {
        "8 x FakeGPU": [FakeGPU("a40", index=i) for i in range(8)],
        "8 x NVMLGPU over the pynvml double": discover(None, nvml=nvml, rapl_root=None, estimate_cpu=False).gpus,
    }
    for label, gpus in variants.items():
        monitor = Monitor(gpus).start(background=False)
        t0 = time.perf_counter()
        for _ in range(passes):
            monitor.sample()
        out[label] = (time.perf_counter() - t0) / passes * 1e6
        monitor.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=12, help="blocks per side (bare and monitored alternate)")
    parser.add_argument("--steps", type=int, default=25, help="training steps per block")
    parser.add_argument("--fake-gpus", type=int, default=8, help="fake GPUs the monitor samples besides real devices")
    args = parser.parse_args()
    torch.set_num_threads(1)
    bare_s, monitored_s, n_gpus = overhead(args.blocks, args.steps, args.fake_gpus)
    print(f"step time, median of {args.blocks * args.steps} steps per side (bare/monitored interleaved):")
    print(f"  bare      {bare_s * 1e3:8.3f} ms")
    print(f"  monitored {monitored_s * 1e3:8.3f} ms  ({n_gpus} GPUs + CPU domains sampled at 0.1 s, step_begin/end per step)")
    print(f"  ratio     {monitored_s / bare_s:8.4f}  (target <= 1.005)")
    print("one sampling pass:")
    for label, us in sampling_pass_us().items():
        print(f"  {label:36s} {us:8.1f} us")


if __name__ == "__main__":
    main()
