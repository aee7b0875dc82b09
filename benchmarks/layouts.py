"""Every valid parallel layout of a world, measured, and the ``--mesh auto`` planner's choice against the sweep.

One process group of ``--world`` ranks (gloo on the CPU, NCCL on GPUs) runs,
in one launch so start-up is paid once:

1. the sweep: every layout ``pp × dp_replicate × dp_shard × cp × ep × tp``
   the model allows and that fits in memory (the planner's own candidate
   list), one warm-up step each, then ``--steps`` steps with the energy of
   each step read as the planner reads it (``default_meter``: NVML or RAPL
   counters where they exist, else the ranks' CPU time at the host's TDP per
   CPU, labelled estimated). On the CPU all layouts are built first and
   measured step by step in turn (the order reversed every other step), so
   load from other processes falls on all of them alike; on GPUs one after
   another. Each figure is the median over its steps;
2. the planner: ``Trainer`` with ``parallel.mesh = "auto"`` (its default
   trials), as ``greentrain train --mesh auto`` runs it.

Printed: a markdown table (tokens/s, energy per token and its source, the
estimate's rank) and the planner's choice against the sweep's best by energy
per token (goal: within 5 %).

    python benchmarks/layouts.py --config tiny --world 4
    python benchmarks/layouts.py --config tiny-moe --world 4
    python benchmarks/layouts.py --config 125m --world 8 --device cuda --steps 5   # a GPU node
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # ranks share the cores: one thread each


def _config(args: argparse.Namespace, mesh: str):
    from greentrain.runtime.config import load_config

    cfg = load_config(args.config)
    cfg = cfg.replace("train", device=args.device, steps=10_000, warmup_steps=0, decay="constant")
    cfg = cfg.replace("checkpoint", dir=None).replace("metrics", jsonl=None)
    return cfg.replace("parallel", mesh=mesh)


def _sweep(args: argparse.Namespace, world: int) -> list[dict]:
    from greentrain.runtime.autolayout import default_meter, measure_candidates, trial_configs
    from greentrain.runtime.mesh_planner import detect_hardware, plan_mesh
    from greentrain.runtime.trainer import Trainer

    cfg = _config(args, "manual")
    hw = detect_hardware(args.device, cfg.train.dtype, cfg.parallel.device_memory_gb, world)
    plan = plan_mesh(cfg.model, world_size=world, seq_len=cfg.train.seq_len, global_batch=cfg.train.global_batch,
                     hardware=hw)
    layouts = list(plan.candidates)
    meter = default_meter(args.device)
    try:
        together = args.device == "cpu"
        figures = measure_candidates(trial_configs(cfg, layouts, args.steps), Trainer, meter, args.steps,
                                     together=together)
    finally:
        meter.close()
    return [{"layout": layout.describe(), "parallel": layout.parallel(), "ac": layout.ac,
             "estimate_rank": i + 1, "estimated_mj_per_token": layout.energy_per_token_j * 1e3,
             "mj_per_token": f.energy() * 1e3, "tokens_per_s": f.speed(), "source": f.source}
            for i, (layout, f) in enumerate(zip(layouts, figures))]


def _rank(rank: int, world: int, store_dir: str, args: argparse.Namespace, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    if args.device == "cuda":
        torch.cuda.set_device(rank)
    store = dist.FileStore(str(Path(store_dir) / "store"), world)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo", store=store, rank=rank, world_size=world)
    try:
        from greentrain.runtime.trainer import Trainer

        sweep = _sweep(args, world)
        auto = Trainer(_config(args, "auto"))
        choice = {"layout": auto.plan.best.describe(), "reason": auto.plan.reason}
        auto.close()
        if rank == 0:
            Path(out).write_text(json.dumps({"sweep": sweep, "planner": choice}), encoding="utf-8")
    finally:
        dist.destroy_process_group()


def _table(result: dict, args: argparse.Namespace) -> str:
    sweep = sorted(result["sweep"], key=lambda row: row["mj_per_token"])
    best = sweep[0]["mj_per_token"]
    chosen = result["planner"]["layout"]
    lines = [f"`{args.config}`, {args.world} ranks ({args.device}), {args.steps} measured steps per layout "
             f"(median); energy per token: {sweep[0]['source']}",
             "",
             "| layout | tokens/s | energy per token (mJ) | vs best | estimate's rank | planner |",
             "|---|---:|---:|---:|---:|---|"]
    for row in sweep:
        mark = "**chosen**" if row["layout"] == chosen else ""
        lines.append(f"| {row['layout']} | {row['tokens_per_s']:,.0f} | {row['mj_per_token']:.3f} | "
                     f"{row['mj_per_token'] / best - 1:+.1%} | {row['estimate_rank']} | {mark} |")
    picked = next((r for r in sweep if r["layout"] == chosen), None)
    if picked is None:
        lines.append(f"\nplanner chose {chosen}, which the sweep did not measure")
    else:
        gap = picked["mj_per_token"] / best - 1
        verdict = "within" if gap <= 0.05 else "NOT within"
        lines.append(f"\nplanner's choice: {chosen}, {gap:+.1%} energy per token vs the sweep's best "
                     f"({verdict} the 5 % goal)")
    lines.append("\nplanner's reason:\n```\n" + result["planner"]["reason"] + "\n```")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="tiny", help="preset or TOML file (default tiny)")
    parser.add_argument("--world", type=int, default=4, help="ranks (default 4)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--steps", type=int, default=6, help="measured steps per layout (default 6)")
    parser.add_argument("--json", help="also write the raw results here")
    args = parser.parse_args()
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available() or torch.cuda.device_count() < args.world:
            print(f"cuda: not measured: needs {args.world} GPUs here")
            sys.exit(0)
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="gt-layouts-") as tmp:
        out = str(Path(tmp) / "result.json")
        mp.start_processes(_rank, args=(args.world, tmp, args, out), nprocs=args.world, start_method="spawn")
        result = json.loads(Path(out).read_text(encoding="utf-8"))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(_table(result, args))


if __name__ == "__main__":
    main()
