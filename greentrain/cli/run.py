"""``greentrain run``: run an unmodified command under a timing policy.

    greentrain run --policy carbon-aware --zone GB --deadline +12 --estimate-hours 4 \\
        --pause-mode suspend -- python train.py --epochs 3

Delays the start to a cleaner window, pauses during dirty hours (``suspend``:
SIGSTOP/SIGCONT of the command's process group; ``checkpoint``: sends
``--checkpoint-signal`` — the program saves and exits — and relaunches it at
the planned time — only for a program that declared the handshake, ``greentrain.job.handshake``; any
other is suspended, with one line), and exits with the command's own status — or 3 when the command
succeeded but finished after the deadline (``--deadline-policy strict``, the default), 127 when it is
not found (one line, nothing run), 130 after Ctrl-C. Its output is not touched; greentrain's own lines
(the plan at the start, the summary at the end: 'failed (exit N)' for a command that failed, with no
deadline verdict and no avoided grams) go to stderr.
``--replay-speedup`` runs the policy on a replayed calendar (demos, tests): with
``--provider csv:TRACE`` an hour of trace passes in 3600/speedup seconds.
``--scaling-profile FILE`` (carbon scaling): the policy also picks the command's
process count per interval; a change is the checkpoint signal and a relaunch
with ``--nproc``/``--nproc-per-node`` changed (``greentrain.job.replicas``).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import click

from greentrain.cli.common import parse_deadline
from greentrain.cli.jobflags import job_flags, job_options, take_settings
from greentrain.clock import Clock, ReplayClock, SystemClock
from greentrain.engine import Engine
from greentrain.exitcodes import (
    COMMAND_NOT_EXECUTABLE_EXIT_CODE, COMMAND_NOT_FOUND_EXIT_CODE, DEADLINE_MISSED_EXIT_CODE,
)
from greentrain.job.build import Job
from greentrain.job.options import JobOptions
from greentrain.job.replicas import CommandScaler

__all__ = ["run"]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@job_flags("run", defaults={"pause_mode": "suspend", "job": None}, notes={
    "pause_mode": "Here suspend is SIGSTOP/SIGCONT of the command's process group, safe for any command (its devices "
                  "idle); checkpoint releases them, only for a program that declared the handshake (saves and exits "
                  "75 on --checkpoint-signal; greentrain.job.handshake): any other is suspended, with one line.",
    "job": "Default: the command's name."})
@click.option("--estimate-hours", type=float, help="Running time the command needs, hours (needed to plan).")
@click.option("--checkpoint-signal", default="SIGUSR1", show_default=True,
              help="Signal that asks a command that declared the handshake to save and exit 75 (checkpoint mode; "
                   "$GREENTRAIN_CHECKPOINT_SIGNAL).")
@click.option("--checkpoint-timeout-s", type=float, default=600.0, show_default=True,
              help="How long to wait for the command to exit after the checkpoint signal.")
@click.option("--interval-s", type=float, default=1.0, show_default=True,
              help="How often to check the plan while the command runs (real seconds).")
@click.option("--no-measure", is_flag=True, help="Do not measure energy (no device discovery).")
@click.option("--replay-speedup", type=float, help="Run on a replayed calendar this many times faster.")
@click.option("--replay-start", help="Start of the replayed calendar (ISO-8601 with timezone).")
@click.option("--advise-only", is_flag=True,
              help="Advisory mode for COMMAND: sets GREENTRAIN_ADVISE_ONLY=1, so a greentrain Session inside "
                   "it reports power-limit, clock and precision decisions and applies none.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command: tuple[str, ...], estimate_hours: float | None, checkpoint_signal: str, checkpoint_timeout_s: float,
        interval_s: float, no_measure: bool, replay_speedup: float | None, replay_start: str | None,
        advise_only: bool, **flags: object) -> None:
    """Run COMMAND (after '--') at low-carbon times, passing through its output and exit status."""
    from greentrain.job.process import ChildProcess, parse_signal
    from greentrain.job.supervisor import Supervisor

    _check_numbers(estimate_hours=estimate_hours, interval_s=interval_s, checkpoint_timeout_s=checkpoint_timeout_s,
                   replay_speedup=replay_speedup)
    settings = take_settings(flags, "run")
    if settings.get("deadline") is not None and estimate_hours is None:
        raise click.BadParameter("needed with --deadline to plan the run", param_hint="--estimate-hours")
    if replay_start is not None and replay_speedup is None:
        raise click.BadParameter("needs --replay-speedup", param_hint="--replay-start")
    options = job_options(settings, job=settings.get("job") or Path(command[0]).name,
                          step_time_s=interval_s * (replay_speedup or 1.0))
    _check_output(options)
    if advise_only:
        from greentrain.actuators.advisory import ADVISE_ENV

        os.environ[ADVISE_ENV] = "1"  # inherited by COMMAND; `run` itself never touches GPU settings
    checkpoint_signal_number = parse_signal(checkpoint_signal)
    child = ChildProcess(list(command))
    _require_command(command[0])  # before the plan: a typo is one line, not a job that ran nothing
    scaler = _scaler(options, command)
    with _notes_to_stderr():
        job = _build(options, estimate_hours, no_measure, _clock_maker(replay_speedup, replay_start), scaler)
        clock = job.engine.clock
        engine = job.engine
        try:
            start = job.begin(_pause_words(options.pause_mode))  # the deadline's one check: refused before the plan
            supervisor = Supervisor(engine, child, pause_mode=options.pause_mode or "suspend",
                                    checkpoint_signal=checkpoint_signal_number,
                                    checkpoint_timeout_s=checkpoint_timeout_s, poll_s=interval_s, scaler=scaler)
            status = supervisor.run(start)
            finished = status == 0  # a failure, a saved checkpoint or a signal is not the work done
            ended = {} if finished else {"emissions_avoided_g": None}  # nothing avoided by work not done
            job.close(raise_errors=False, finished=finished, finished_at=clock.now() if finished else None,
                      exit_status=status, launches=child.launches, lost_energy_j=supervisor.lost_energy_j,
                      **ended)  # engine, summary line, metrics, monitor, log
        finally:
            job.close(raise_errors=False)  # after a failure: whatever is still open
    sys.exit(final_status(status, engine))


def _pause_words(mode: str | None) -> str:
    """How the plan line says the pause mode: checkpoint pauses need the command's handshake."""
    if mode in ("checkpoint", "auto"):
        return f"{mode} if the command declares the handshake, else suspend"
    return mode or "suspend"


def _require_command(name: str) -> None:
    """COMMAND must exist and be executable: else one line and the shell's status (127, 126), nothing run."""
    found = shutil.which(name)
    if found is not None:
        return
    if os.sep in name and Path(name).exists():
        click.echo(f"greentrain: error: COMMAND: {name!r} is not executable", err=True)
        sys.exit(COMMAND_NOT_EXECUTABLE_EXIT_CODE)
    click.echo(f"greentrain: error: COMMAND: {name!r} not found; check the name or give a full path", err=True)
    sys.exit(COMMAND_NOT_FOUND_EXIT_CODE)


def final_status(command_status: int, engine: Engine) -> int:
    """The command's own status; a clean exit after a missed deadline is 3 unless best-effort."""
    if command_status == 0 and engine.deadline_missed and engine.deadline.policy != "best-effort":
        return DEADLINE_MISSED_EXIT_CODE
    return command_status


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


def _check_numbers(**values: float | None) -> None:
    """The flags of ``run`` itself that must be > 0 (job settings are checked by ``JobOptions``)."""
    for name, value in values.items():
        if value is not None and not value > 0:
            raise click.BadParameter(f"must be > 0, got {value}", param_hint=f"--{name.replace('_', '-')}")


def _check_output(options: JobOptions) -> None:
    """Zone and log folder checked before the command starts (a typo must not run unnoticed)."""
    from greentrain.signals.providers.zones import require_zone
    from greentrain.userfile import check_writable_dir

    require_zone(options.zone, options.provider if isinstance(options.provider, str) else None, "--zone")
    if options.jsonl:
        check_writable_dir(Path(options.jsonl).parent, what=f"--jsonl {options.jsonl}")


def _clock_maker(speedup: float | None, start: str | None) -> Callable[[], Clock]:
    """The job clock, made when the job is built: a replayed calendar starts (and '+H' counts) from then."""
    origin = parse_deadline(start, datetime.now().astimezone(), param="--replay-start") if start else None

    def make() -> Clock:
        if speedup is None:
            return SystemClock()
        return ReplayClock(origin or SystemClock().now(), speedup)

    return make


def _scaler(options: JobOptions, command: tuple[str, ...]) -> CommandScaler | None:
    """The replica actuator for an elastic command (None without ``--scaling-profile``)."""
    if options.scaling_profile is None:
        return None
    from greentrain.policies.scaling_profile import load_scaling_profile

    return CommandScaler(load_scaling_profile(options.scaling_profile), command)


def _build(options: JobOptions, estimate_hours: float | None, no_measure: bool, make_clock: Callable[[], Clock],
           scaler: CommandScaler | None = None) -> Job:
    """The job (``greentrain.job.build_job``): run log, monitor, carbon signal, metrics and engine.

    ``run`` never touches GPU settings (no hardware part, even with ``--advise-only``) and plans in
    ``--interval-s`` steps of work. The devices count as held while paused until the command declares
    the checkpoint handshake (the supervisor then counts them released: the command exits)."""
    from greentrain.job.build import JobParts, build_job
    from greentrain.jobstats import JobStats
    from greentrain.policies import load_policy

    policy = load_policy(options.policy)
    work_s = estimate_hours * 3600.0 if estimate_hours else None
    parts = JobParts(clock=make_clock(), devices=False if no_measure else None)
    return build_job(options, parts, policy=policy, job_stats=JobStats(job=options.job), work_total_s=work_s,
                     hardware_released=False, drives_hardware=False, scaler=scaler)
