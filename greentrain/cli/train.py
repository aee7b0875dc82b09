"""``greentrain train``: train the reference transformer with hybrid parallelism.

Run it under ``torchrun`` (one process per device), or give ``--nproc N`` to
have it launch ``torchrun`` on this machine. ``--config`` takes a TOML file or
a preset (``tiny``, ``tiny-moe``, ``125m``, ``1b``, ``1b-moe``); flags and ``--set section.key=value``
override it. Errors in the configuration are one line and exit code 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from collections.abc import Mapping
from pathlib import Path

import click

from greentrain.cli.jobflags import flag_argv, flag_of, job_flags, section_flags
from greentrain.errors import ConfigError
from greentrain.exitcodes import RESUME_EXIT_CODE
from greentrain.runtime.sections import SECTIONS
from greentrain.userfile import TOMLTable, TOMLValue

__all__ = ["train"]

# flag -> (section, key) of the training config; the job settings are generated from JobOptions (job_flags) and
# land in [greentrain] under their own names.
FLAG_KEYS: dict[str, tuple[str, str]] = {
    "steps": ("train", "steps"), "seed": ("train", "seed"), "global_batch": ("train", "global_batch"),
    "seq_len": ("train", "seq_len"), "grad_accum": ("train", "grad_accum"), "lr": ("train", "lr"),
    "mesh": ("parallel", "mesh"), "dp_replicate": ("parallel", "dp_replicate"), "dp_shard": ("parallel", "dp_shard"),
    "tp": ("parallel", "tp"), "pp": ("parallel", "pp"), "cp": ("parallel", "cp"), "ep": ("parallel", "ep"),
    "pp_schedule": ("parallel", "pp_schedule"), "microbatches": ("parallel", "microbatches"),
    "virtual_stages": ("parallel", "virtual_stages"),
    "dtype": ("train", "dtype"), "ac": ("train", "ac"), "compile": ("train", "compile"), "device": ("train", "device"),
    "metrics_jsonl": ("metrics", "jsonl"), "metrics_port": ("metrics", "port"), "metrics_addr": ("metrics", "addr"),
    "metrics_allow_public": ("metrics", "allow_public"),
    "checkpoint_dir": ("checkpoint", "dir"), "checkpoint_interval": ("checkpoint", "interval"),
    "async_checkpoint": ("checkpoint", "async_save"),
}
"""Each flag's key in the training config: the flag is generated from that section's field (its type, choices
and docstring; ``jobflags.section_flags``), so flag and file key are one declaration and one check."""


def _parse_set(items: tuple[str, ...]) -> dict[str, TOMLTable]:
    out: dict[str, TOMLTable] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise click.BadParameter(f"{item!r} is not section.key=value (e.g. train.lr=1e-3)", param_hint="--set")
        value: TOMLValue
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()  # a bare word: take it as a string
        out.setdefault(section, {})[name] = value
    return out


def build_config(config: str, flags: Mapping[str, object], sets: tuple[str, ...]):
    """Preset/file, then ``--set``, then explicit flags (highest precedence); validated.

    A bad value is blamed on where it came from: the flag, the ``--set`` item,
    or the file and key.
    """
    return build_config_with_sources(config, flags, sets)[0]


def build_config_with_sources(config: str, flags: Mapping[str, object], sets: tuple[str, ...]):
    """(JobConfig, where) where ``where("train.steps")`` names the source of that key in messages."""
    from greentrain.runtime.config import SECTIONS, config_from_dict, load_config_data

    loaded, origin = load_config_data(config)
    data: dict[str, object] = dict(loaded)  # flag values join the file's: no longer TOML values only
    sources: dict[str, str] = {}
    for section, values in _parse_set(sets).items():
        if section not in SECTIONS:
            raise ConfigError(f"--set: unknown section {section!r}; valid: {', '.join(SECTIONS)}")
        _table(data, section, origin).update(values)
        sources.update({f"{section}.{key}": f"--set {section}.{key}" for key in values})
    for flag, value in flags.items():
        if value is not None:
            section, key = FLAG_KEYS.get(flag, ("greentrain", flag))  # not a training flag: a job setting
            _table(data, section, origin)[key] = value
            sources[f"{section}.{key}"] = flag_of(flag) if section == "greentrain" else "--" + flag.replace("_", "-")

    def where(key: str) -> str:
        return sources.get(key) or f"{origin}: {key}"

    try:
        return config_from_dict(data, origin=origin, sources=sources), where
    except ConfigError as e:  # and what preflight would say of the [greentrain] names: every problem in one pass
        from greentrain.runtime.preflight import outside_problems

        g = data.get("greentrain")
        more = outside_problems(g.get("policy"), g.get("provider"), g.get("zone"), where) if isinstance(g, dict) else []
        raise ConfigError("\n".join([str(e), *more])) from None


def _table(data: dict[str, object], section: str, origin: str) -> dict[str, object]:
    """The file's ``[section]`` table, made when absent; a key that is not a table is the file's error (a
    command-line value for that section cannot go in it)."""
    table = data.setdefault(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{origin}: {section}: must be a table [{section}]")  # as config_from_dict says it
    return table


def _launch(nproc: int, max_restarts: int, argv: list[str]) -> int:
    """Re-run this command under torchrun with ``nproc`` local processes (argument list, no shell)."""
    args = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0", "--max-restarts", str(max_restarts),
            "-m", "greentrain", "train", *argv]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # N processes sharing the cores: one thread each unless told
    return subprocess.call(args, env=env)


def argv_for_ranks(config: str, sets: tuple[str, ...], flags: Mapping[str, object]) -> list[str]:
    """The same command line for the launched ranks (without --nproc/--max-restarts)."""
    argv = ["--config", config]
    for item in sets:
        argv += ["--set", item]
    for flag, value in flags.items():
        if value is None:
            continue
        if flag not in FLAG_KEYS:
            argv += flag_argv(flag, value)  # a job setting
        elif flag == "compile":
            argv.append("--compile" if value else "--no-compile")
        elif flag == "async_checkpoint":
            argv.append("--async-checkpoint" if value else "--sync-checkpoint")
        elif flag == "metrics_allow_public":
            if value:
                argv.append("--metrics-allow-public")
        else:
            argv += ["--" + flag.replace("_", "-"), str(value)]
    return argv


def _pause_resume_at(cfg) -> datetime | None:
    """When the ranks stopped for a checkpoint-mode pause: the planned resume time (else None)."""
    if not (cfg.greentrain.policy and cfg.checkpoint.dir):
        return None
    from greentrain.job.state import STATE_FILE_NAME, EngineState, load_state

    state = load_state(Path(cfg.checkpoint.dir) / STATE_FILE_NAME, cfg.greentrain.job)
    return EngineState.parse_time(state.resume_at) if state is not None and state.resume_at else None


def _launch_until_done(cfg, nproc: int, max_restarts: int, argv: list[str]) -> None:
    """Run torchrun; after a policy pause (ranks checkpoint and exit) wait for the resume time and relaunch."""
    import time

    last_resume_at = None
    while True:
        rc = _launch(nproc, max_restarts, argv)
        if rc == 0:
            return
        resume_at = _pause_resume_at(cfg)
        if resume_at is None or resume_at == last_resume_at:  # a failure, not a (new) pause
            raise click.ClickException(f"torchrun exited with status {rc} (see the rank output above)")
        last_resume_at = resume_at
        wait_s = max(0.0, (resume_at - datetime.now(UTC)).total_seconds())
        click.echo(f"paused by policy; checkpoint saved; relaunching at {resume_at.isoformat()} ({wait_s:.0f} s)")
        time.sleep(wait_s)


def _echo_step(m) -> None:
    mfu = f" mfu {m.mfu:.1%}" if m.mfu is not None else ""
    router = (f"  aux {m.aux_loss:.3f} imbalance {m.expert_imbalance:.2f}"
              if getattr(m, "expert_imbalance", None) is not None else "")
    click.echo(f"step {m.step:>6}  loss {m.loss:.4f}  grad_norm {m.grad_norm:.3f}  lr {m.lr:.2e}  "
               f"{m.tokens_per_s:,.0f} tok/s{mfu}{router}  [{m.precision}]")


def _init_distributed(backend: str) -> None:
    """init_process_group from torchrun's environment, keyed by restart attempt.

    After ``--max-restarts`` brings the group back, the launcher's store still
    holds the dead ranks' addresses; a fast rank could read them before the new
    rank 0 overwrites them and fail to connect. A per-attempt key prefix avoids
    the stale entries.
    """
    import torch.distributed as dist

    store, rank, world = next(dist.rendezvous("env://"))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    store = dist.PrefixStore(f"greentrain/attempt-{attempt}", store)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)


def _train_here(cfg) -> None:
    """Train in this process (one rank of a torchrun job, or a single process)."""
    import torch
    import torch.distributed as dist

    from greentrain.runtime.greentrain_hooks import run_training
    from greentrain.runtime.teardown import release_process_groups

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        _init_distributed("nccl" if torch.cuda.is_available() and cfg.train.device != "cpu" else "gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    every = cfg.metrics.log_every

    def report(m) -> None:
        if rank == 0 and (m.step % every == 0 or m.step == cfg.train.steps):
            _echo_step(m)

    def ready(trainer) -> None:
        if rank == 0:
            if trainer.plan is not None:
                click.echo(f"mesh auto: {trainer.plan.reason}")
            from greentrain.runtime.checkpoint import latest_step

            last = latest_step(cfg.checkpoint.dir) if cfg.checkpoint.dir else None
            # Said before the load: a damaged newest checkpoint falls back to an older one, with its own line.
            resumed = f", resuming from the newest complete checkpoint (newest on disk: step {last})" if last else ""
            click.echo(f"training on {trainer.dims.describe()} ({trainer.device.type}){resumed}")

    def run() -> tuple[int | None, int]:
        """Train; (replica count to relaunch at or None, exit status). The trainer is freed on return."""
        trainer, history = run_training(cfg, on_step=report, on_ready=ready, handle_signals=True)
        rescale_to = getattr(trainer, "rescale_to", None)
        if rank == 0 and rescale_to is not None:
            click.echo(f"checkpoint at step {trainer.step}; relaunching at {rescale_to} replicas")
        elif rank == 0:
            click.echo(f"done: {trainer.step}/{trainer.cfg.train.steps} steps on {trainer.dims.describe()}"
                       + (f", final loss {history[-1].loss:.4f}" if history else ""))
        return rescale_to, getattr(trainer, "deadline_exit_code", 0)

    try:
        rescale_to, status = run()
    finally:
        release_process_groups()  # the trainer is gone: its groups are freed before teardown, not during it
    if rescale_to is not None:  # carbon scaling: the elastic launcher relaunches at the new size
        sys.exit(RESUME_EXIT_CODE)
    if status and world == 1:  # one process: say it with the status; torchrun would read it as a crash
        sys.exit(status)


@click.command("train")
@click.option("--config", "config", default="tiny", show_default=True,
              help="TOML file or preset (tiny, tiny-moe, 125m, 1b, 1b-moe).")
@click.option("--set", "sets", multiple=True, metavar="SECTION.KEY=VALUE", help="Override any config key.")
@section_flags(SECTIONS, FLAG_KEYS, spellings={"async_checkpoint": "--async-checkpoint/--sync-checkpoint"})
@job_flags("train")
@click.option("--profile-scaling", is_flag=True,
              help="Measure throughput and power at each replica count up to --nproc; write --scaling-profile.")
@click.option("--nproc", type=int, default=None, help="Launch N local processes with torchrun.")
@click.option("--max-restarts", type=int, default=0, show_default=True, help="torchrun restarts (with --nproc).")
def train(config: str, sets: tuple[str, ...], nproc: int | None, max_restarts: int, profile_scaling: bool,
          **flags: object) -> None:
    """Train the reference transformer (FSDP2 × TP × PP × CP × EP on a DeviceMesh)."""
    if nproc is not None and nproc < 1:
        raise click.BadParameter("must be >= 1", param_hint="--nproc")
    cfg, where = build_config_with_sources(config, flags, sets)
    if profile_scaling:
        from greentrain.cli.train_elastic import profile_scaling as measure

        measure(cfg, nproc, max_restarts)
        return
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ
    elastic = bool(cfg.greentrain.scaling_profile and cfg.greentrain.policy) and not under_torchrun
    launching = nproc is not None and (nproc > 1 or elastic) and not under_torchrun
    world_size = nproc if launching and nproc is not None else int(os.environ.get("WORLD_SIZE", "1"))
    from greentrain.runtime.preflight import preflight

    preflight(cfg, where, world_size=world_size)  # every value and folder checked before step 1
    if elastic:
        from greentrain.cli.train_elastic import check_elastic, launch_elastic

        nproc = check_elastic(cfg, nproc)
        launch_elastic(cfg, nproc, max_restarts, argv_for_ranks(config, sets, flags), _launch,
                       lambda: _pause_resume_at(cfg))
        return
    if launching and nproc is not None:  # launching: an --nproc was given
        _launch_until_done(cfg, nproc, max_restarts, argv_for_ranks(config, sets, flags))
        return
    _train_here(cfg)
