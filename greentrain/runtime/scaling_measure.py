"""``greentrain train --profile-scaling``: measure the job's throughput and power at each replica count.

For each count r the launcher starts the ranks (``r × tp × pp`` processes)
with this module as their program: they build the job at that size (same
global batch, the micro-batch kept, accumulation absorbing the rest; no
checkpoint, no policy), run one warm-up step, then ``greentrain.scaling_profile_steps``
timed steps, and rank 0 writes the timed window's wall-clock edges and tokens.
Meanwhile the launcher's own energy monitor samples this node's devices
(GPUs through NVML, CPU packages through RAPL, else the labelled estimate);
the draw is the energy between the window's edges over its length. Each row
says where its power came from (``measured``, ``integrated``, ``estimated``):
the throughput is always measured (tokens over wall-clock seconds).

One node only: the monitor sees this machine's devices. On a cluster, run it
on a node with the largest count, or supply a profile file.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from greentrain.engine.collaborators import EnergyMonitor
from greentrain.errors import ConfigError
from greentrain.policies.scaling_profile import ScalingPoint, ScalingProfile
from greentrain.provenance import Source
from greentrain.runtime.config import JobConfig, config_from_dict
from greentrain.runtime.elastic import config_at, elastic_sets, micro_batch, replicas_of
from greentrain.runtime.teardown import release_process_groups

if TYPE_CHECKING:
    from greentrain.runtime.trainer import Trainer


class SourcedMonitor(EnergyMonitor, Protocol):
    """A monitor that says where its energy figures come from (``greentrain.monitor.Monitor``)."""

    def source(self) -> Source: ...

__all__ = ["EnergyTrace", "measure_scaling", "profile_counts", "rank_main", "torchrun_launch"]


def profile_counts(cfg: JobConfig, max_world: int) -> tuple[list[int], int]:
    """The replica counts to measure up to ``max_world`` processes (those the global batch splits into at the
    configured micro-batch) and that micro-batch."""
    micro = micro_batch(cfg, max_world)
    counts = []
    for replicas in range(1, replicas_of(cfg, max_world) + 1):
        try:
            elastic_sets(cfg, replicas, micro)
        except ConfigError:
            continue
        counts.append(replicas)
    return counts, micro


class EnergyTrace:
    """Samples a monitor's cumulative energy with wall-clock stamps; energy between two stamps by interpolation."""

    def __init__(self, monitor: EnergyMonitor, interval_s: float = 0.1) -> None:
        self.monitor = monitor
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="greentrain-scaling-trace", daemon=True)

    def __enter__(self) -> EnergyTrace:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            energy_j = self.monitor.total_energy_j()
            if energy_j is not None:  # nothing measured yet (or at all): no sample, energy_j() says None
                self.samples.append((time.time(), energy_j))
            if self._stop.wait(self.interval_s):
                return

    def energy_j(self, t0: float, t1: float) -> float | None:
        """Joules drawn between wall-clock times ``t0`` and ``t1`` (None when the trace does not cover them)."""
        samples = list(self.samples)
        if len(samples) < 2 or not samples[0][0] <= t0 < t1 <= samples[-1][0]:
            return None
        times = [t for t, _ in samples]

        def at(t: float) -> float:
            i = min(max(bisect.bisect_right(times, t), 1), len(samples) - 1)
            (ta, ea), (tb, eb) = samples[i - 1], samples[i]
            return ea + (eb - ea) * ((t - ta) / (tb - ta) if tb > ta else 0.0)

        return at(t1) - at(t0)


def measure_scaling(cfg: JobConfig, counts: list[int], micro: int, launch: Callable[[int, Path, Path], int],
                    monitor: SourcedMonitor, *, note: Callable[[str], None] = print) -> ScalingProfile:
    """Launch ``launch(world_size, config_json, result_json)`` at each count while ``monitor`` (started) samples
    this node; the profile of every count that ran (a count whose launch fails is reported and skipped)."""
    points: list[ScalingPoint] = []
    with tempfile.TemporaryDirectory(prefix="greentrain-scaling-") as folder, EnergyTrace(monitor) as trace:
        for replicas in counts:
            sized = config_at(cfg, replicas, micro).to_dict()
            sized["greentrain"] = {"job": cfg.greentrain.job}  # plain training: no policy, no pauses
            sized["checkpoint"] = {"dir": None}
            sized["metrics"] = {"fetch_every": 1}
            config_path, result_path = Path(folder) / f"cfg-{replicas}.json", Path(folder) / f"out-{replicas}.json"
            config_path.write_text(json.dumps(sized), encoding="utf-8")
            world = replicas * cfg.parallel.tp * cfg.parallel.pp
            status = launch(world, config_path, result_path)
            if status != 0 or not result_path.is_file():
                note(f"--profile-scaling: {replicas} replicas ({world} processes) failed (exit {status}); skipped")
                continue
            result = json.loads(result_path.read_text(encoding="utf-8"))
            throughput = result["tokens"] / (result["t1"] - result["t0"])
            energy_j = trace.energy_j(result["t0"], result["t1"])
            if energy_j is None or energy_j <= 0:
                note(f"--profile-scaling: no energy reading for {replicas} replicas; skipped")
                continue
            power_w = energy_j / (result["t1"] - result["t0"])
            points.append(ScalingPoint(replicas, throughput, power_w, monitor.source()))
            note(f"{replicas} replicas: {throughput:,.0f} tokens/s, {power_w:.1f} W ({monitor.source().value})")
    if not points:
        raise ConfigError("--profile-scaling: no replica count could be measured")
    return ScalingProfile(tuple(points), "measured")


def rank_main(argv: list[str] | None = None) -> None:
    """One rank of a profiling launch (``python -m greentrain.runtime.scaling_measure``, under torchrun)."""
    parser = argparse.ArgumentParser(prog="greentrain.runtime.scaling_measure")
    parser.add_argument("--config-json", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, required=True)
    args = parser.parse_args(argv)
    import torch.distributed as dist

    from greentrain.runtime.trainer import Trainer

    import torch

    world = int(os.environ.get("WORLD_SIZE", "1"))
    cfg = config_from_dict(json.loads(Path(args.config_json).read_text(encoding="utf-8")), origin="profile")
    if world > 1:
        dist.init_process_group("nccl" if torch.cuda.is_available() and cfg.train.device != "cpu" else "gloo")
    try:
        _measure(Trainer(cfg), world, args.steps, Path(args.out))
    finally:
        release_process_groups()  # the trainer is gone: its groups are freed before teardown, not during it


def _measure(trainer: Trainer, world: int, steps: int, out_path: Path) -> None:
    """Time ``steps`` steps after one warm-up step; rank 0 writes the result to ``out_path``."""
    trainer.train_step()  # warm-up: allocation, first collectives
    _barrier(world)
    t0 = time.time()
    for _ in range(steps):
        trainer.train_step()  # reads loss and norm back: the step has finished on the device
    _barrier(world)
    t1 = time.time()
    if trainer.rank == 0:
        out = {"t0": t0, "t1": t1, "tokens": steps * trainer.tokens_per_step, "world": world}
        out_path.write_text(json.dumps(out), encoding="utf-8")


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


def torchrun_launch(steps: int, max_restarts: int = 0) -> Callable[[int, Path, Path], int]:
    """A ``launch`` for ``measure_scaling``: torchrun on this machine (argument lists, no shell)."""

    def launch(world: int, config_path: Path, result_path: Path) -> int:
        args = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(world),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0", "--max-restarts", str(max_restarts),
                "-m", "greentrain.runtime.scaling_measure", "--config-json", str(config_path),
                "--out", str(result_path), "--steps", str(steps)]
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")  # N processes sharing the cores: one thread each unless told
        return subprocess.call(args, env=env)

    return launch


if __name__ == "__main__":
    rank_main()
