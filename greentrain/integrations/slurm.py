"""Slurm: submit a batch job at its lowest-carbon start, and move it when the forecast changes.

``greentrain submit`` plans with :mod:`greentrain.integrations.placement` and
hands the result to ``sbatch --begin``; the plan (zone, deadline, estimate) is
remembered in the job's comment as ``greentrain(zone=..;deadline=..;estimate_h=..)``
so ``greentrain submit --reschedule JOBID`` can re-plan the pending job later and
move it with ``scontrol update StartTime=``. Every command is an argument list;
nothing is ever passed through a shell. Slurm reads and prints times in the
local zone, so we run its tools with ``TZ=UTC``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from greentrain.errors import ActuationError, ConfigError
from greentrain.exitcodes import RESUME_EXIT_CODE

__all__ = [
    "SlurmClient",
    "JobTag",
    "format_slurm_time",
    "parse_slurm_time",
    "parse_time_limit_s",
    "parse_job_record",
    "find_option",
    "split_sbatch_args",
    "round_up_to_second",
    "PAUSED_EXIT_CODE",
    "RESUME_FILE_ENV",
    "REPLICAS_FILE_ENV",
    "write_resume_time",
    "write_replicas",
]

_TAG_RE = re.compile(r"greentrain\(([^)]*)\)")
_JOB_ID_RE = re.compile(r"\d+(?:_\d+)?")
_FIELD_RE = re.compile(r"([A-Za-z][A-Za-z0-9_:/]*)=(.*)")


def format_slurm_time(when: datetime) -> str:
    """``when`` as Slurm's ``YYYY-MM-DDTHH:MM:SS`` (UTC, which is what our ``TZ=UTC`` calls read)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def parse_slurm_time(text: str) -> datetime | None:
    """Parse a time printed by Slurm under ``TZ=UTC``; None for 'Unknown', 'None', 'N/A'."""
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def parse_time_limit_s(text: str) -> float:
    """Slurm ``--time`` formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S -> seconds."""
    value = text.strip()
    days = 0
    if "-" in value:
        day_text, value = value.split("-", 1)
        if not day_text.isdigit():
            raise ConfigError(f"--time: {text!r} is not a Slurm time limit (e.g. 90, 4:00:00, 1-12)")
        days = int(day_text)
    parts = value.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        raise ConfigError(f"--time: {text!r} is not a Slurm time limit (e.g. 90, 4:00:00, 1-12)")
    numbers = [int(p) for p in parts]
    if days:  # D-H, D-H:M, D-H:M:S
        numbers += [0] * (3 - len(numbers))
        hours, minutes, seconds = numbers
    elif len(numbers) == 1:
        hours, minutes, seconds = 0, numbers[0], 0
    elif len(numbers) == 2:
        hours, minutes, seconds = 0, numbers[0], numbers[1]
    else:
        hours, minutes, seconds = numbers
    total_s = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total_s <= 0:
        raise ConfigError(f"--time: {text!r} must be longer than zero")
    return float(total_s)


# sbatch options that take no value (or only an optional one, which must then be
# written --opt=value); every other option takes the next argument as its value.
_NO_VALUE_LONG = frozenset(
    "--contiguous --exclusive --get-user-env --help --hold --ignore-pbs --kill-on-invalid-dep --nice "
    "--no-kill --no-requeue --overcommit --oversubscribe --parsable --propagate --quiet --reboot --requeue "
    "--spread-job --test-only --usage --use-min-nodes --verbose --version --wait".split()
)
_NO_VALUE_SHORT = frozenset("hHkOQsvVW")


def split_sbatch_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``[OPTIONS...] script [script args...]`` into (options, script and its arguments)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        takes_value = (
            ("=" not in arg and arg not in _NO_VALUE_LONG)
            if arg.startswith("--")
            else (len(arg) == 2 and arg[1] not in _NO_VALUE_SHORT)
        )
        i += 2 if takes_value else 1
    return list(args[:i]), list(args[i:])


def find_option(args: Sequence[str], long: str, short: str | None = None) -> str | None:
    """Last value of an sbatch option (``--time=X``, ``--time X``, ``-t X``, ``-tX``) among the options."""
    options, _ = split_sbatch_args(args)
    found: str | None = None
    for i, arg in enumerate(options):
        if arg == long or (short is not None and arg == short):
            found = options[i + 1] if i + 1 < len(options) else None
        elif arg.startswith(long + "="):
            found = arg[len(long) + 1 :]
        elif short is not None and arg.startswith(short) and not arg.startswith("--") and len(arg) > 2:
            found = arg[len(short) :]
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class JobTag:
    """What ``submit`` planned with, kept in the job's comment for rescheduling."""

    zone: str
    deadline: datetime
    estimate_h: float
    power_limit_w: int | None = None
    """GPU power limit the Slurm prolog applies to the job's GPUs (integrations/slurm/prolog.sh)."""
    places: tuple[str, ...] = ()
    """Every ``[CLUSTER:]PARTITION=ZONE`` the job was submitted to choose from (kept when more than one, so
    that a pending or requeued job may be re-placed among them)."""

    def render(self) -> str:
        deadline = self.deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        places = f";places={','.join(self.places)}" if len(self.places) > 1 else ""
        power = f";power_limit_w={self.power_limit_w}" if self.power_limit_w is not None else ""
        return f"greentrain(zone={self.zone}{places};deadline={deadline};estimate_h={self.estimate_h:g}{power})"

    @classmethod
    def find(cls, comment: str, job_id: str) -> JobTag:
        """Read the tag out of a job comment; ConfigError if the job was not submitted by greentrain."""
        match = _TAG_RE.search(comment or "")
        if match is None:
            raise ConfigError(
                f"job {job_id}: no greentrain plan in its comment; submit it with 'greentrain submit' "
                "or pass --zone, --deadline and --estimate-hours"
            )
        fields = dict(item.split("=", 1) for item in match.group(1).split(";") if "=" in item)
        try:
            deadline = datetime.fromisoformat(fields["deadline"].replace("Z", "+00:00"))
            power = fields.get("power_limit_w")
            places = tuple(p for p in fields.get("places", "").split(",") if p)
            return cls(zone=fields["zone"], deadline=deadline.astimezone(UTC), estimate_h=float(fields["estimate_h"]),
                       power_limit_w=int(power) if power else None, places=places)
        except (KeyError, ValueError):
            raise ConfigError(f"job {job_id}: greentrain plan in its comment is damaged: {match.group(0)!r}") from None


def parse_job_record(text: str) -> dict[str, str]:
    """Parse one ``scontrol -o show job`` line into fields (values may contain spaces, e.g. Comment)."""
    record: dict[str, str] = {}
    last: str | None = None
    for token in text.strip().split(" "):
        match = _FIELD_RE.fullmatch(token)
        if match:
            last = match.group(1)
            record[last] = match.group(2)
        elif last is not None:
            record[last] += " " + token
    return record


class SlurmClient:
    """Thin wrapper over ``sbatch`` and ``scontrol`` (argument lists, UTC, bounded waits)."""

    def __init__(
        self,
        *,
        sbatch: str = "sbatch",
        scontrol: str = "scontrol",
        scancel: str = "scancel",
        env: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self._sbatch = sbatch
        self._scontrol = scontrol
        self._scancel = scancel
        self._env = {**(os.environ if env is None else env), "TZ": "UTC"}
        self._timeout_s = timeout_s

    def _run(self, argv: list[str]) -> str:
        program = shutil.which(argv[0], path=self._env.get("PATH"))
        if program is None:
            raise ConfigError(f"{argv[0]}: not found on PATH; run this on a Slurm login node")
        try:
            done = subprocess.run(
                [program, *argv[1:]], env=self._env, capture_output=True, text=True, timeout=self._timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ActuationError(f"{argv[0]}: no answer within {self._timeout_s:g} s; is slurmctld up?") from None
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise ActuationError(f"{argv[0]} failed (exit {done.returncode}): {detail[-1] if detail else 'no output'}")
        return done.stdout

    def submit(self, sbatch_args: Sequence[str]) -> str:
        """Run ``sbatch --parsable ARGS``; return the job id."""
        out = self._run([self._sbatch, "--parsable", *sbatch_args]).strip()
        job_id = out.split(";", 1)[0]
        if not _JOB_ID_RE.fullmatch(job_id):
            raise ActuationError(f"sbatch: unexpected answer {out!r} (expected a job id)")
        return job_id

    def job(self, job_id: str) -> dict[str, str]:
        """Fields of ``scontrol -o show job JOBID``."""
        _check_job_id(job_id)
        out = self._run([self._scontrol, "-o", "show", "job", job_id]).strip()
        if not out:
            raise ConfigError(f"job {job_id}: unknown to Slurm")
        return parse_job_record(out.splitlines()[0])

    def set_start(self, job_id: str, start: datetime) -> None:
        """Move a pending job's earliest start (``scontrol update JobId=.. StartTime=..``)."""
        _check_job_id(job_id)
        self._run([self._scontrol, "update", f"JobId={job_id}", f"StartTime={format_slurm_time(start)}"])

    def set_partition(self, job_id: str, partition: str) -> None:
        """Move a pending job to another partition (``scontrol update JobId=.. Partition=..``)."""
        _check_job_id(job_id)
        if not re.fullmatch(r"[\w.-]+", partition):
            raise ConfigError(f"partition: {partition!r} is not a Slurm partition name")
        self._run([self._scontrol, "update", f"JobId={job_id}", f"Partition={partition}"])

    def set_comment(self, job_id: str, comment: str) -> None:
        """Replace a job's comment (``scontrol update JobId=.. Comment=..``): where its greentrain tag lives."""
        _check_job_id(job_id)
        if "\n" in comment or len(comment) > 1000:
            raise ConfigError(f"job {job_id}: comment must be one line of at most 1000 characters")
        self._run([self._scontrol, "update", f"JobId={job_id}", f"Comment={comment}"])

    def jobs(self) -> list[dict[str, str]]:
        """Fields of every job slurmctld knows (``scontrol -o show job``); [] when there are none."""
        out = self._run([self._scontrol, "-o", "show", "job"])
        return [parse_job_record(line) for line in out.splitlines() if line.startswith("JobId=")]

    def nodes(self) -> list[dict[str, str]]:
        """Fields of every node (``scontrol -o show node``)."""
        out = self._run([self._scontrol, "-o", "show", "node"])
        return [parse_job_record(line) for line in out.splitlines() if line.startswith("NodeName=")]

    def release(self, job_id: str) -> None:
        """Release a held pending job (``scontrol release``)."""
        _check_job_id(job_id)
        self._run([self._scontrol, "release", job_id])

    def hold(self, job_id: str) -> None:
        """Hold a pending job so it does not start (``scontrol hold``)."""
        _check_job_id(job_id)
        self._run([self._scontrol, "hold", job_id])

    def signal_batch(self, job_id: str, signal_name: str = "USR1") -> None:
        """Send ``signal_name`` to the job's batch script only (``scancel --batch --signal=``).

        The checkpoint-on-signal path: greentrain's batch template forwards USR1 to the trainer,
        which saves a checkpoint and exits 75, and the template requeues the job. This never
        cancels a job: ``scancel`` is only ever called with ``--signal``.
        """
        _check_job_id(job_id)
        if not re.fullmatch(r"[A-Z0-9]+", signal_name):
            raise ConfigError(f"signal: {signal_name!r} is not a signal name (e.g. USR1)")
        self._run([self._scancel, "--batch", f"--signal={signal_name}", job_id])


def _check_job_id(job_id: str) -> None:
    if not _JOB_ID_RE.fullmatch(job_id):
        raise ConfigError(f"JOBID: {job_id!r} is not a Slurm job id (digits, or ARRAYID_TASK)")


def round_up_to_second(when: datetime) -> datetime:
    """Slurm has one-second resolution; never plan a start before the computed one."""
    if when.microsecond:
        return when.replace(microsecond=0) + timedelta(seconds=1)
    return when


PAUSED_EXIT_CODE = RESUME_EXIT_CODE
"""Exit status meaning 'paused by policy, checkpoint saved: requeue me' (EX_TEMPFAIL).

``integrations/slurm/greentrain-job.sbatch`` requeues the job on this status."""

RESUME_FILE_ENV = "GREENTRAIN_RESUME_FILE"
"""Environment variable naming the file where the trainer writes when to resume."""


def write_resume_time(until: datetime | None, env: Mapping[str, str] | None = None) -> Path | None:
    """Tell the batch script when to resume (UTC, Slurm format); no-op outside the template."""
    target = (os.environ if env is None else env).get(RESUME_FILE_ENV)
    if not target or until is None:
        return None
    path = Path(target)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(format_slurm_time(round_up_to_second(until)) + "\n", encoding="utf-8")
    tmp.replace(path)  # the batch script never reads a half-written time
    return path


REPLICAS_FILE_ENV = "GREENTRAIN_REPLICAS_FILE"
"""Environment variable naming the file where an elastic trainer writes the replica count to requeue at."""


def write_replicas(replicas: int, env: Mapping[str, str] | None = None) -> Path | None:
    """Tell the batch script the count to requeue at (carbon scaling); no-op outside the template.

    ``integrations/slurm/greentrain-job.sbatch`` reads it after exit status 75 and updates the requeued job's
    node, GPU or task count (``GREENTRAIN_SCALE_BY``)."""
    target = (os.environ if env is None else env).get(REPLICAS_FILE_ENV)
    if not target or replicas < 1:
        return None
    path = Path(target)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{int(replicas)}\n", encoding="utf-8")
    tmp.replace(path)
    return path
