"""``greentrain run``: run an unmodified command under a timing policy.

    greentrain run --policy carbon-aware --zone GB --deadline +12 --estimate-hours 4 \\
        --pause-mode suspend -- python train.py --epochs 3

Delays the start to a cleaner window, pauses during dirty hours (``suspend``:
SIGSTOP/SIGCONT of the command's process group; ``checkpoint``: sends
``--checkpoint-signal`` — the program saves and exits — and relaunches it at
the planned time), and exits with the command's own status — or 3 when the command succeeded but
finished after the deadline (``--deadline-policy strict``, the default). Its output is not touched;
greentrain's own lines (the plan at the start, the summary at the end) go to stderr.
``--replay-speedup`` runs the policy on a replayed calendar (demos, tests): with
``--provider csv:TRACE`` an hour of trace passes in 3600/speedup seconds.
``--scaling-profile FILE`` (carbon scaling): the policy also picks the command's
process count per interval; a change is the checkpoint signal and a relaunch
with ``--nproc``/``--nproc-per-node`` changed (``greentrain.job.replicas``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from greentrain.cli.common import DEADLINE_HELP, DEADLINE_POLICY_HELP, parse_deadline
from greentrain.exitcodes import DEADLINE_MISSED_EXIT_CODE
from greentrain.job.options import choices_of
from greentrain.engine.guard import check_deadline
from greentrain.engine.jobsummary import job_figures, plan_line, summary_line

__all__ = ["run"]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--policy", default="carbon-aware", show_default=True, help="Preset name or policy TOML file.")
@click.option("--zone", help="Grid zone, e.g. GB, DE-LU, US-CAL-CISO.")
@click.option("--provider", help="Carbon source: electricitymaps | watttime | ukgrid | static | csv:PATH.")
@click.option("--deadline", help=DEADLINE_HELP)
@click.option("--deadline-policy", type=click.Choice(choices_of("deadline_policy")), help=DEADLINE_POLICY_HELP)
@click.option("--pause-mode", type=click.Choice(choices_of("pause_mode")),
              help="How to pause. Default suspend: safe for any command, holds its devices (they idle); "
                   "checkpoint needs a program that saves and exits on --checkpoint-signal, and releases them; "
                   "auto releases when holding the planned pause would cost more than a checkpoint and restart.")
@click.option("--waiting-power-w", type=float, default=None,
              help="Draw while paused, watts, instead of the measured idle draw of the held devices (0 when "
                   "released): e.g. a node that stays powered for you.")
@click.option("--max-emissions-g", type=float, default=None,
              help="Carbon budget, grams CO2eq: warn once when the projection exceeds it; when spent, stop the "
                   "command (checkpoint signal, or SIGTERM in suspend mode) and exit with status 4.")
@click.option("--max-energy-j", type=float, default=None, help="Energy budget, joules (as --max-emissions-g).")
@click.option("--estimate-hours", type=float, help="Running time the command needs, hours (needed to plan).")
@click.option("--checkpoint-signal", default="SIGUSR1", show_default=True,
              help="Signal that asks the command to save and exit (checkpoint mode).")
@click.option("--checkpoint-timeout-s", type=float, default=600.0, show_default=True,
              help="How long to wait for the command to exit after the checkpoint signal.")
@click.option("--interval-s", type=float, default=1.0, show_default=True,
              help="How often to check the plan while the command runs (real seconds).")
@click.option("--metrics-port", type=int, help="Serve Prometheus metrics on this port.")
@click.option("--metrics-addr", default="127.0.0.1", show_default=True, help="Metrics bind address.")
@click.option("--metrics-allow-public", is_flag=True, help="Allow a non-loopback --metrics-addr (logs a warning).")
@click.option("--jsonl", type=click.Path(dir_okay=False), help="Write the JSONL run log here.")
@click.option("--job", help="Job label for metrics and logs (default: the command's name).")
@click.option("--no-measure", is_flag=True, help="Do not measure energy (no device discovery).")
@click.option("--replay-speedup", type=float, help="Run on a replayed calendar this many times faster.")
@click.option("--replay-start", help="Start of the replayed calendar (ISO-8601 with timezone).")
@click.option("--scaling-profile", type=click.Path(dir_okay=False),
              help="Carbon scaling: CSV replicas,throughput,power_w of the command; the policy picks its "
                   "--nproc/--nproc-per-node per interval (relaunched after the checkpoint signal). "
                   "--estimate-hours is the running time at the command's own count.")
@click.option("--advise-only", is_flag=True,
              help="Advisory mode for COMMAND: sets GREENTRAIN_ADVISE_ONLY=1, so a greentrain Session inside "
                   "it reports power-limit, clock and precision decisions and applies none.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command: tuple[str, ...], **opts: Any) -> None:
    """Run COMMAND (after '--') at low-carbon times, passing through its output and exit status."""
    from greentrain.job.process import ChildProcess, parse_signal
    from greentrain.job.supervisor import Supervisor

    _check_numbers(opts)
    _check_output(opts)
    if opts.pop("advise_only"):
        from greentrain.actuators.advisory import ADVISE_ENV

        os.environ[ADVISE_ENV] = "1"  # inherited by COMMAND; `run` itself never touches GPU settings
    clock = _make_clock(opts["replay_speedup"], opts["replay_start"])
    deadline = parse_deadline(opts["deadline"], clock.now()) if opts["deadline"] else None
    if deadline is not None and opts["estimate_hours"] is None:
        raise click.BadParameter("needed with --deadline to plan the run", param_hint="--estimate-hours")
    policy = _load_policy(opts["policy"])
    # Not the policy's default: an unmodified command would be killed, not checkpointed, by the signal.
    pause_mode = opts["pause_mode"] or "suspend"
    checkpoint_signal = parse_signal(opts["checkpoint_signal"])
    child = ChildProcess(list(command))
    job_name = opts["job"] or Path(command[0]).name
    scaler = _scaler(opts.pop("scaling_profile"), command)
    with _notes_to_stderr():
        job = _build(policy, opts, clock, deadline, job_name, scaler)
        engine = job.engine
        try:
            if deadline is not None and engine.deadline_policy != "best-effort":  # refused before the plan
                check_deadline(deadline, clock.now(), engine.work_remaining_s())
            _say(plan_line(policy=opts["policy"], zone=opts["zone"], provider=opts["provider"],
                           work_s=engine.work_total_s, deadline=deadline, pause_mode=pause_mode,
                           simulated=opts["replay_speedup"] is not None))
            status = Supervisor(engine, child, pause_mode=pause_mode, checkpoint_signal=checkpoint_signal,
                                checkpoint_timeout_s=opts["checkpoint_timeout_s"], poll_s=opts["interval_s"],
                                scaler=scaler).run()
            finished = status < 128  # not stopped by a signal
            engine.close(finished=finished, finished_at=clock.now() if finished else None, exit_status=status,
                         launches=child.launches)
            _say(summary_line(job_figures(engine), status))
        finally:
            job.close(raise_errors=False)  # the engine (if not closed above), metrics, monitor, signals, log
    sys.exit(final_status(status, engine))


def final_status(command_status: int, engine: Any) -> int:
    """The command's own status; a clean exit after a missed deadline is 3 unless best-effort."""
    if command_status == 0 and engine.deadline_missed and engine.deadline_policy != "best-effort":
        return DEADLINE_MISSED_EXIT_CODE
    return command_status


def _say(line: str) -> None:
    click.echo(line, err=True)  # stdout belongs to the command


@contextmanager
def _notes_to_stderr() -> Iterator[None]:
    """greentrain's warnings and notes go to stderr, one line each, whatever the root logger does."""
    logger = logging.getLogger("greentrain")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    previous, logger.propagate = logger.propagate, False
    previous_level = logger.level
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = previous
        logger.setLevel(previous_level)  # SystemExit passes through click's non-standalone main unchanged


def _check_numbers(opts: dict[str, Any]) -> None:
    for name in ("estimate_hours", "interval_s", "checkpoint_timeout_s", "replay_speedup"):
        value = opts[name]
        if value is not None and not value > 0:
            raise click.BadParameter(f"must be > 0, got {value}", param_hint=f"--{name.replace('_', '-')}")
    for name in ("max_emissions_g", "max_energy_j"):
        value = opts[name]
        if value is not None and not 0 < value < float("inf"):
            raise click.BadParameter(f"must be a number > 0, got {value}", param_hint=f"--{name.replace('_', '-')}")
    waiting_w = opts["waiting_power_w"]
    if waiting_w is not None and not 0 <= waiting_w < float("inf"):
        raise click.BadParameter(f"must be a number of watts >= 0, got {waiting_w}", param_hint="--waiting-power-w")


def _check_output(opts: dict[str, Any]) -> None:
    """Zone and log folder checked before the command starts (a typo must not run unnoticed)."""
    from greentrain.signals.zones import require_zone
    from greentrain.userfile import check_writable_dir

    require_zone(opts["zone"], opts["provider"], "--zone")
    if opts["jsonl"]:
        check_writable_dir(Path(opts["jsonl"]).parent, what=f"--jsonl {opts['jsonl']}")


def _make_clock(speedup: float | None, start: str | None) -> Any:
    from greentrain.clock import ReplayClock, SystemClock

    if speedup is None:
        if start is not None:
            raise click.BadParameter("needs --replay-speedup", param_hint="--replay-start")
        return SystemClock()
    origin = parse_deadline(start, datetime.now().astimezone(), param="--replay-start") if start else None
    return ReplayClock(origin or SystemClock().now(), speedup)


def _load_policy(spec: str) -> Any:
    from greentrain.policies import load_policy

    return load_policy(spec)


def _scaler(profile_path: str | None, command: tuple[str, ...]) -> Any:
    """The replica actuator for an elastic command (None without --scaling-profile)."""
    if profile_path is None:
        return None
    from greentrain.job.replicas import CommandScaler
    from greentrain.policies.scaling_profile import load_scaling_profile

    return CommandScaler(load_scaling_profile(profile_path), command)


def _build(policy: Any, opts: dict[str, Any], clock: Any, deadline: datetime | None, job_name: str,
           scaler: Any = None) -> Any:
    """The job (``greentrain.job.build_job``): run log, monitor, carbon signal, metrics and engine.

    ``run`` never touches GPU settings (no hardware part, even with ``--advise-only``), plans in
    ``--interval-s`` steps of work, and counts the devices as released during a checkpoint pause
    (the command exits)."""
    from greentrain.job.build import JobParts, build_job
    from greentrain.job.options import JobOptions
    from greentrain.jobstats import JobStats

    options = JobOptions(
        policy=policy, zone=opts["zone"], provider=opts["provider"], deadline=deadline,
        deadline_policy=opts["deadline_policy"], step_time_s=opts["interval_s"] * clock.speedup,
        waiting_power_w=opts["waiting_power_w"], max_emissions_g=opts["max_emissions_g"],
        max_energy_j=opts["max_energy_j"], metrics_port=opts["metrics_port"], metrics_addr=opts["metrics_addr"],
        metrics_allow_public=opts["metrics_allow_public"], jsonl=opts["jsonl"], job=job_name)
    work_s = opts["estimate_hours"] * 3600.0 if opts["estimate_hours"] else None
    return build_job(options, JobParts(clock=clock, devices=False if opts["no_measure"] else None, scaler=scaler),
                     policy=policy, job_stats=JobStats(job=job_name), work_total_s=work_s,
                     hardware_released=opts["pause_mode"] == "checkpoint", drives_hardware=False)
