"""``greentrain train`` for elastic jobs: carbon scaling under ``--nproc``, and ``--profile-scaling``.

With ``--scaling-profile FILE`` (``[greentrain] scaling_profile``), a policy and
``--nproc N``, the job starts at N processes and the policy picks the replica
count per interval: a change is a checkpoint, a relaunch of torchrun at the
new size (``greentrain.runtime.relaunch.ElasticLauncher``) and a DCP reshard.
``--profile-scaling`` measures the profile instead and writes it to FILE.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from greentrain.errors import ConfigError

if TYPE_CHECKING:
    from greentrain.runtime.config import JobConfig

__all__ = ["check_elastic", "launch_elastic", "profile_scaling"]


def check_elastic(cfg: JobConfig, nproc: int | None) -> int:
    """One line per problem before anything launches: the profile, --nproc, the checkpoint folder; the
    process count it starts at."""
    from greentrain.policies.scaling_profile import load_scaling_profile
    from greentrain.runtime.elastic import micro_batch, replicas_of

    if nproc is None:
        raise ConfigError("--scaling-profile: carbon scaling relaunches the job at other sizes; give --nproc N "
                          "(the processes it starts at)")
    if not cfg.checkpoint.dir:
        raise ConfigError("--scaling-profile: carbon scaling needs --checkpoint-dir (each change of replica count "
                          "is a checkpoint and a relaunch)")
    profile_path = cfg.greentrain.scaling_profile
    if profile_path is None:
        raise ConfigError("--scaling-profile: carbon scaling needs a scaling profile")
    profile = load_scaling_profile(profile_path)
    try:
        replicas = replicas_of(cfg, nproc)
    except ConfigError as e:
        raise ConfigError(f"--nproc: {e}") from None
    if replicas not in profile.replica_counts:
        raise ConfigError(f"--nproc: {nproc} processes are {replicas} replicas, not a count in "
                          f"{cfg.greentrain.scaling_profile} (valid: {', '.join(map(str, profile.replica_counts))})")
    try:
        micro_batch(cfg, nproc)
    except ConfigError as e:
        raise ConfigError(f"--nproc: {e}") from None
    return nproc


def launch_elastic(cfg: JobConfig, nproc: int, max_restarts: int, argv: list[str],
                   launch: Callable[[int, int, list[str]], int], resume_at: Callable[[], datetime | None]) -> None:
    """Run the elastic launcher; ``launch(nproc, max_restarts, argv)`` is torchrun on this machine."""
    from greentrain.runtime.elastic import elastic_sets, micro_batch, replicas_of
    from greentrain.runtime.relaunch import ElasticLauncher

    micro = micro_batch(cfg, nproc)
    per_replica = cfg.parallel.tp * cfg.parallel.pp

    def at(replicas: int) -> int:
        sets = elastic_sets(cfg, replicas, micro)
        extra = ["--grad-accum", str(sets["train"]["grad_accum"]), "--dp-shard", "-1", "--dp-replicate", "1",
                 "--mesh", "manual"]  # flags win over the config file and --set
        return launch(replicas * per_replica, 0, [*argv, *extra])

    if not cfg.checkpoint.dir:  # check_elastic refused it first
        raise ConfigError("--scaling-profile: carbon scaling needs --checkpoint-dir")
    launcher = ElasticLauncher(cfg.checkpoint.dir, replicas_of(cfg, nproc), at, max_restarts=max_restarts,
                               resume_at=resume_at, note=lambda line: click.echo(f"greentrain: {line}", err=True))
    status = launcher.run()
    if status != 0:
        raise click.ClickException(f"torchrun exited with status {status} (see the rank output above)")


def profile_scaling(cfg: JobConfig, nproc: int | None, max_restarts: int) -> None:
    """Measure throughput and power at each count up to --nproc; write the CSV to --scaling-profile."""
    from greentrain.device import discover
    from greentrain.monitor.monitor import Monitor
    from greentrain.policies.scaling_profile import format_scaling_profile
    from greentrain.runtime.scaling_measure import measure_scaling, profile_counts, torchrun_launch
    from greentrain.userfile import check_writable_dir

    out = cfg.greentrain.scaling_profile
    if not out:
        raise ConfigError("--profile-scaling: give --scaling-profile FILE to write the profile to")
    if nproc is None or nproc < 1:
        raise ConfigError("--profile-scaling: give --nproc N, the most processes to measure")
    check_writable_dir(Path(out).resolve().parent, what=f"--scaling-profile {out}")
    counts, micro = profile_counts(cfg, nproc)
    devices = discover()
    monitor = Monitor.from_devices(devices, interval_s=0.1).start()
    try:
        click.echo(f"measuring {', '.join(map(str, counts))} replicas, {cfg.greentrain.scaling_profile_steps} steps each "
                   f"(micro-batch {micro}, global batch {cfg.train.global_batch})", err=True)
        profile = measure_scaling(cfg, counts, micro, torchrun_launch(cfg.greentrain.scaling_profile_steps, max_restarts),
                                  monitor, note=lambda line: click.echo(line, err=True))
    finally:
        monitor.stop()
        devices.close()
    Path(out).write_text(format_scaling_profile(profile.points), encoding="utf-8")
    click.echo(f"wrote {out} ({len(profile.points)} counts; throughput in tokens/s)")
