"""Run a function on N ranks started from a forkserver that has imported torch.

Ranks never fork the test process itself: CUDA builds of torch refuse a fork
after autograd has run ("Unable to handle autograd's threading in combination
with fork-based multiprocessing"), and the test process has usually run it. The
forkserver is a fresh process that imports torch once (preloaded) and never
runs autograd, so each rank still starts in ~0.1 s instead of 4–11 s for
torchrun. Each child uses one OpenMP thread, gloo on 127.0.0.1 and a FileStore
rendezvous (no port races). ``fn`` must be a module-level function (it is
pickled by reference). Each rank's return value is pickled to a file; a
child's exception comes back with its traceback; the whole group is killed at
``timeout_s``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["run_ranks", "tiny_config"]


def _child(fn: Callable, rank: int, world: int, folder: str, args: tuple) -> None:
    out = Path(folder) / f"rank{rank}.pkl"
    try:
        os.environ.update(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1",
                          RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        store = dist.FileStore(str(Path(folder) / "store"), world)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
        try:
            result = ("ok", fn(rank, world, *args))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - report everything to the parent
        result = ("error", traceback.format_exc())
    out.write_bytes(pickle.dumps(result))
    os._exit(0)


def rank_context() -> mp.context.BaseContext:
    # The forkserver inherits the environment it starts with: one OpenMP thread per rank.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed"])  # no effect once the server runs
    return ctx


def run_ranks(fn: Callable[..., Any], world: int, *args: Any, timeout_s: float = 120.0) -> list[Any]:
    """Run ``fn(rank, world, *args)`` on ``world`` ranks from the forkserver; results in rank order."""
    ctx = rank_context()
    with tempfile.TemporaryDirectory(prefix="gt-ranks-") as folder:
        procs = [ctx.Process(target=_child, args=(fn, r, world, folder, args), daemon=True) for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout_s
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        alive = [p for p in procs if p.is_alive()]
        for p in alive:
            p.kill()
            p.join()
        results = []
        errors = []
        for r in range(world):
            path = Path(folder) / f"rank{r}.pkl"
            if not path.exists():
                errors.append(f"rank {r}: no result (timed out after {timeout_s}s or crashed)")
                continue
            status, value = pickle.loads(path.read_bytes())
            if status == "error":
                errors.append(f"rank {r}:\n{value}")
            results.append(value)
        if errors:
            raise AssertionError("\n".join(errors))
        return results


def tiny_config(**sections: dict[str, Any]):
    """A very small model and batch: 4 blocks, width 32, 3 steps of 8 × 16 tokens."""
    from greentrain.runtime.config import config_from_dict

    base: dict[str, dict[str, Any]] = {
        "model": {"dim": 32, "n_layers": 4, "n_heads": 4, "vocab_size": 256, "max_seq_len": 64},
        "train": {"steps": 3, "global_batch": 8, "seq_len": 16, "lr": 1e-2, "warmup_steps": 1,
                  "device": "cpu", "max_grad_norm": 1.0},
        "data": {"max_bytes": 100_000},
    }
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    return config_from_dict(base, origin="test")
