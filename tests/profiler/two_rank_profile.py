"""One rank of the two-rank agreement test: profile a fake GPU, print the result as JSON.

usage: two_rank_profile.py RANK WORLD PORT STATE_DIR CACHE_DIR
Rank r profiles a different workload, so per-rank measurements differ; the
all-reduce must still give every rank the same operating points.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import torch.distributed as dist

from greentrain.actuators import ActuatorSet
from greentrain.profiler import OperatingPointProfiler, ProfileCache
from greentrain.testing import FakeGPU

WORKLOADS = ["imagenet/resnet50", "cifar100/shufflenetv2"]


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
    print(json.dumps(results), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
