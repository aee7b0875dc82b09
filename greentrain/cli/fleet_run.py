"""``greentrain fleet run``: the fleet controller on a Slurm cluster, one round every interval.

Rounds run on an APScheduler interval (one at a time; a late round is run
once, not caught up). SIGINT/SIGTERM stop it between rounds; the journal is
saved after every round, so a restart carries on.

Each ``--partition`` names a managed partition and its grid zone
(``NAME=ZONE``), optionally the GPUs the plan may use there and the recorded
trace of its zone (``NAME=ZONE:GPUS[:TRACE]``, as ``fleet simulate`` takes
them): with partitions on several zones, the plan moves jobs to the cleaner one.
"""

from __future__ import annotations

import signal
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict, Unpack

import click

from greentrain.errors import ConfigError

__all__ = ["run"]

_EPILOG = """\b
Jobs opt in with a tag in their comment, submitted held:
  sbatch --hold --requeue --gpus=8 \\
    --comment="greentrain-fleet(deadline=2026-11-27T06:00:00Z;estimate_h=4)" greentrain-job.sbatch
\b
Needs a Slurm cluster (run it where scontrol and scancel reach slurmctld):
  greentrain fleet run --partition gpu=GB --state-dir /var/lib/greentrain/fleet   [needs cluster]
\b
Partitions on two grids; jobs tagged places=north,south move to the cleaner one:
  greentrain fleet run --partition north=NO:64 --partition south=DE:64   [needs cluster]
"""


def _partitions(specs: tuple[str, ...]) -> tuple[dict[str, str], dict[str, int], dict[str, Path]]:
    """(partition -> zone, partition -> GPUs cap, zone -> trace) from ``--partition``; every problem at once."""
    from greentrain.cli.fleet_partitions import parse_partition_spec

    zones: dict[str, str] = {}
    caps: dict[str, int] = {}
    traces: dict[str, Path] = {}
    problems: list[str] = []
    for spec in specs:
        name, sep, rest = spec.partition("=")
        if sep and ":" not in rest:
            if not name.strip() or not rest.strip():
                problems.append(f"--partition {spec!r}: expected NAME=ZONE or NAME=ZONE:GPUS[:TRACE] (e.g. gpu=GB)")
                continue
            parsed_name, zone = name.strip(), rest.strip()
        else:
            parsed = parse_partition_spec(spec)
            if isinstance(parsed, str):
                problems.append(parsed)
                continue
            parsed_name, zone = parsed.name, parsed.zone
            caps[parsed_name] = parsed.gpus
            if parsed.trace is not None and traces.setdefault(zone, parsed.trace) != parsed.trace:
                problems.append(f"--partition {parsed_name}: zone {zone} already has the trace {traces[zone]}")
        if parsed_name in zones:
            problems.append(f"--partition {spec!r}: partition {parsed_name!r} is given twice")
        zones[parsed_name] = zone
    if problems:
        raise ConfigError("\n".join(problems))
    return zones, caps, traces


class _SourceFlags(TypedDict):
    """The flags that choose the carbon signal together: a live provider, or recorded traces replayed."""

    provider: str | None
    traces: tuple[str, ...]
    replay_start: str | None


def _intensity(zone_traces: dict[str, Path], *, provider: str | None, traces: tuple[str, ...],
               replay_start: str | None):
    from greentrain.cli.common import parse_deadline
    from greentrain.clock import SystemClock
    from greentrain.integrations.fleet_forecast import ProviderIntensity, ReplayIntensity

    if traces or zone_traces:
        if replay_start is None:
            raise ConfigError("--replay-start: needed with --replay-trace or a TRACE in --partition (the trace time "
                              "the controller's first round stands for)")
        start = parse_deadline(replay_start, datetime.now(UTC), "--replay-start")
        return ReplayIntensity(traces, replay_start=start, by_zone={z: p for z, p in zone_traces.items()})
    return ProviderIntensity(provider or "electricitymaps", clock=SystemClock())


@click.command("run", epilog=_EPILOG)
@click.option("--partition", "partition_specs", multiple=True, required=True, metavar="NAME=ZONE[:GPUS[:TRACE]]",
              help="A partition to manage, its grid zone, optionally the GPUs the plan may use there and its "
                   "zone's recorded trace (replayed as --replay-trace is); repeat for several.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("greentrain-fleet"),
              show_default=True, help="Where the journal (fleet-journal.json) lives.")
@click.option("--interval-s", type=click.FloatRange(min=1.0), default=300.0, show_default=True,
              help="Seconds between rounds.")
@click.option("--power-kw-per-gpu", type=click.FloatRange(min=0.0, min_open=True), default=0.7, show_default=True,
              help="Draw of one running GPU with its host share, kW (for the plan and the estimates).")
@click.option("--resume-overhead-min", type=click.FloatRange(min=0.0), default=5.0, show_default=True,
              help="Minutes a resumed job runs before it makes progress again (in plan time).")
@click.option("--migration-overhead-min", type=click.FloatRange(min=0.0), default=None,
              help="Minutes a started job runs without progress after a move to another partition "
                   "(checkpoint transfer; default: as a resume).")
@click.option("--provider", help="Carbon signal provider spec (default: electricitymaps).")
@click.option("--replay-trace", "traces", multiple=True, type=click.Path(dir_okay=False),
              help="Plan on a recorded Electricity Maps CSV instead of a live forecast (repeat per zone).")
@click.option("--replay-start", help="Trace time the first round stands for (ISO-8601 with zone).")
@click.option("--seconds-per-hour", type=click.FloatRange(min=0.01), default=3600.0, show_default=True,
              help="Length of a plan hour; below 3600 compresses the clock (tests and demos only).")
@click.option("--metrics-port", type=int, default=None, help="Serve the fleet metrics on 127.0.0.1:PORT.")
@click.option("--once", is_flag=True, help="Run one round and exit.")
@click.option("--dry-run", is_flag=True, help="Plan and print the actions; change nothing in Slurm.")
def run(partition_specs: tuple[str, ...], state_dir: Path, interval_s: float, power_kw_per_gpu: float,
        resume_overhead_min: float, migration_overhead_min: float | None, seconds_per_hour: float,
        metrics_port: int | None, once: bool, dry_run: bool, **source: Unpack[_SourceFlags]) -> None:
    """Plan every fleet job of a Slurm cluster each interval and act on it: start, delay, pause, resume, move."""
    from greentrain.fleet import PlannerConfig
    from greentrain.fleet.metrics import FleetCollector, FleetStats
    from greentrain.integrations.fleet_controller import ControllerConfig, FleetController
    from greentrain.integrations.fleet_journal import FleetJournal
    from greentrain.integrations.slurm import SlurmClient

    zones, caps, zone_traces = _partitions(partition_specs)
    config = ControllerConfig(partitions=zones, capacity_gpus=caps, power_kw_per_gpu=power_kw_per_gpu,
                              resume_overhead_h=resume_overhead_min / 60.0,
                              migration_overhead_h=None if migration_overhead_min is None
                              else migration_overhead_min / 60.0,
                              planner=PlannerConfig(), dry_run=dry_run)
    intensity = _intensity(zone_traces, **source)
    journal = FleetJournal.open(state_dir / "fleet-journal.json", now=datetime.now(UTC), hour_s=seconds_per_hour)
    stats = FleetStats()
    controller = FleetController(SlurmClient(), journal, intensity, config, stats)
    server = _metrics_server(metrics_port, FleetCollector(stats))
    try:
        if once:
            _round(controller)
        else:
            _serve(controller, interval_s)
    finally:
        if server is not None:
            server.stop()


def _round(controller) -> None:
    report = controller.round(datetime.now(UTC))
    stamp = report.now.isoformat(timespec="seconds")
    for action in report.actions:
        click.echo(f"{stamp} {action}")
    for note in report.notes:
        click.echo(f"{stamp} note: {note}", err=True)


def _serve(controller, interval_s: float) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.interval import IntervalTrigger

    stop = threading.Event()
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.add_job(_round, IntervalTrigger(seconds=interval_s, timezone=UTC), args=[controller],
                      id="fleet-round", max_instances=1, coalesce=True, next_run_time=datetime.now(UTC))
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    scheduler.start()
    try:
        stop.wait()
    finally:
        scheduler.shutdown(wait=True)  # a round in progress finishes and saves the journal
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _metrics_server(port: int | None, collector):
    if port is None:
        return None
    from prometheus_client.registry import CollectorRegistry

    from greentrain.exporters.server import MetricsServer

    registry = CollectorRegistry()
    registry.register(collector)
    server = MetricsServer(job="greentrain-fleet", port=port, registry=registry)
    server.start()
    click.echo(f"fleet metrics at {server.url}", err=True)
    return server
