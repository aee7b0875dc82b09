"""One rank of the two-rank agreement test: profile a fake GPU and run a precision trial; print JSON.

usage: two_rank_agreement.py RANK WORLD PORT STATE_DIR CACHE_DIR
Rank r profiles a different workload and sees different step energies and
losses, so rank-local choices would differ; the collectives must still give
every rank the same operating points and the same precision switches at the
same steps (and never deadlock).
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import torch.distributed as dist

from greentrain.actuators import ActuatorSet
from greentrain.precision import PrecisionConfig, PrecisionController
from greentrain.profiler import OperatingPointProfiler, ProfileCache
from greentrain.testing import FakeGPU

WORKLOADS = ["imagenet/resnet50", "cifar100/shufflenetv2"]


def precision_trial(rank: int) -> list[list]:
    costs = [{"fp32": 10.0, "bf16": 6.0, "fp16": 8.0}, {"fp32": 10.0, "bf16": 9.0, "fp16": 3.0}][rank]
    pc = PrecisionController(("fp32", "bf16", "fp16"),
                             config=PrecisionConfig(warmup_steps=1, trial_steps=4, guard_window=5, loss_tolerance=0.2))
    switches = []
    for step in range(60):
        loss = 1.0
        if pc.current == "fp16" and ((rank == 1 and step < 40) or (rank == 0 and step >= 40)):
            loss = 100.0  # rank 1 alone diverging is ignored (rank 0 decides); rank 0 diverging reverts both
        to = pc.on_step_end(loss, costs[pc.current], 0.1)
        if to is not None:
            switches.append([step, to])
    return switches


def main() -> None:
    rank, world, port, state_dir, cache_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    now = [0.0]
    gpu = FakeGPU("a40", WORKLOADS[rank % 2], index=rank, time_fn=lambda: now[0])
    cache = ProfileCache(f"{cache_dir}/rank{rank}")  # per-rank caches: only rank 0's is consulted
    with ActuatorSet([gpu], state_dir=f"{state_dir}/rank{rank}", install_hooks=False) as acts:
        results = []
        for _ in range(2):  # second round: rank 0's cache hit must be taken by every rank
            profiler = OperatingPointProfiler([gpu], acts, time_fn=lambda: now[0], fingerprint="w", cache=cache)
            steps = 0
            while not profiler.done:
                profiler.before_step()
                now[0] += gpu.step_time_s(1.0)
                profiler.after_step()
                steps += 1
            results.append({"steps": steps, "from_cache": profiler.from_cache,
                            "points": [[p.power_limit_w, p.relative_speed, p.power_w] for p in profiler.result()]})
    print(json.dumps({"profile": results, "precision": precision_trial(rank)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
