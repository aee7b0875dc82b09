"""The fleet controller's small journal: what Slurm does not remember for it.

Slurm holds each job's state, start time, restart count and comment. The
journal adds the rest, so a restarted controller picks up where it stopped:
the clock origin of its plan hours, the work each job has done in earlier
runs, a pause it signalled but has not yet seen through, the moves between
partitions it made (``migrations``) and the notes of commands that failed. It
is one JSON file, replaced atomically after every round (write to a temporary
file, then rename) and before every move, so a move is written down before
Slurm is asked to make it: a restarted controller that finds the job already
in the new partition books the move once, and never makes it again.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError
from greentrain.userfile import load_json

__all__ = ["JobEntry", "FleetJournal"]

_MAX_NOTES = 20
VERSION = 1


@dataclass(slots=True)
class JobEntry:
    """One managed job's memory."""

    done_h: float = 0.0
    """Work done in runs that have ended, plan hours (resume overheads taken off)."""
    runs_booked: int = 0
    """Slurm's restart count when the last ended run was booked into ``done_h``."""
    run_start: str | None = None
    """Start of the run in progress (Slurm's StartTime), ISO-8601."""
    pausing_since: str | None = None
    """When the controller signalled a pause that Slurm has not yet requeued."""
    resumes: int = 0
    home: str | None = None
    """The partition the job was first seen in (where it was submitted)."""
    moving_to: str | None = None
    """A move to this partition was asked of Slurm and not yet seen done (a running job: after its pause)."""
    moves: int = 0
    """Moves of this job to another partition that Slurm has made."""
    notes: list[str] = field(default_factory=list)

    def note(self, when: datetime, text: str) -> None:
        self.notes = [*self.notes, f"{when.astimezone(UTC).isoformat(timespec='seconds')} {text}"][-_MAX_NOTES:]


@dataclass(slots=True)
class FleetJournal:
    """The controller's state besides Slurm's; ``path=None`` keeps it in memory only."""

    origin: datetime
    hour_s: float
    path: Path | None = None
    jobs: dict[str, JobEntry] = field(default_factory=dict)
    emitted_g: dict[str, float] = field(default_factory=lambda: {"actual": 0.0, "planned": 0.0})
    slurm_errors: int = 0
    migrations: int = 0
    """Moves of jobs between partitions since the journal was started (every job, also those now gone);
    the fleet metrics read it here."""

    @classmethod
    def open(cls, path: Path | None, *, now: datetime, hour_s: float) -> FleetJournal:
        """Load ``path`` if it exists (its origin and hour length win), else start a new one."""
        if path is None or not path.exists():
            # Plan hours start on a whole hour (of hour_s), so they line up with the grid's hours.
            origin = datetime.fromtimestamp(math.floor(now.timestamp() / hour_s) * hour_s, UTC)
            return cls(origin=origin, hour_s=hour_s, path=path)
        data: Any = load_json(path, what="fleet journal")
        try:
            if not isinstance(data, dict):
                raise TypeError(f"a JSON object expected, not {type(data).__name__}")
            journal = cls(origin=datetime.fromisoformat(data["origin"]), hour_s=float(data["hour_s"]), path=path,
                          jobs={str(k): JobEntry(**v) for k, v in data["jobs"].items()},
                          emitted_g={str(k): float(v) for k, v in data.get("emitted_g", {}).items()},
                          slurm_errors=int(data.get("slurm_errors", 0)), migrations=int(data.get("migrations", 0)))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ConfigError(f"{path}: fleet journal is damaged ({type(e).__name__}: {e}); move it away to "
                              "start afresh (Slurm keeps the jobs' own state)") from None
        if journal.hour_s != hour_s:
            raise ConfigError(f"{path}: the journal was written with hours of {journal.hour_s:g} s, not "
                              f"{hour_s:g} s; use the same --seconds-per-hour or move the journal away")
        journal.emitted_g = {"actual": 0.0, "planned": 0.0} | journal.emitted_g
        return journal

    def entry(self, job_id: str) -> JobEntry:
        return self.jobs.setdefault(job_id, JobEntry())

    def forget_except(self, job_ids: set[str]) -> None:
        """Drop jobs Slurm no longer lists as pending or running."""
        self.jobs = {k: v for k, v in self.jobs.items() if k in job_ids}

    def hours(self, when: datetime) -> float:
        """Plan hours since the origin."""
        return (when - self.origin).total_seconds() / self.hour_s

    def time(self, hours: float) -> datetime:
        """The moment ``hours`` plan hours after the origin."""
        return self.origin + timedelta(seconds=hours * self.hour_s)

    def save(self) -> None:
        if self.path is None:
            return
        data = {"version": VERSION, "origin": self.origin.isoformat(), "hour_s": self.hour_s,
                "jobs": {k: asdict(v) for k, v in sorted(self.jobs.items())}, "emitted_g": self.emitted_g,
                "slurm_errors": self.slurm_errors, "migrations": self.migrations}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)
