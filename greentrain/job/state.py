"""Engine state that must survive a checkpoint-mode relaunch.

A relaunched process must keep the *original* deadline (``+12`` means twelve
hours from the first start, not from each relaunch; a different deadline
given on a restart replaces it), the measured step time (so its first
decision can plan), the time already spent running, the emissions totals and
where a simulated calendar stood (a ``ReplayClock`` continues from there). One
small JSON file, written atomically. Its progress is that of the last complete
checkpoint (``greentrain.job.commit``): work done since then and lost is
counted in ``lost_steps``/``lost_energy_j``, never as steps done.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from greentrain.errors import ConfigError
from greentrain.userfile import load_json

if TYPE_CHECKING:
    from greentrain.engine import Engine

__all__ = ["STATE_FILE_NAME", "EngineState", "load_state", "save_state", "state_of", "restore_into", "deadline_spec"]

STATE_FILE_NAME = "greentrain-state.json"
"""The job's state file, beside its checkpoints (``checkpoint_dir``, a framework's checkpoint folder)."""
_VERSION = 1


@dataclass(slots=True, kw_only=True)
class EngineState:
    """What a relaunch needs from the previous run of the same job."""

    job: str
    deadline: str | None = None
    first_start: str | None = None
    submitted_at: str | None = None
    steps_done: int = 0
    running_s: float = 0.0
    step_time_s: float | None = None
    energy_j: float = 0.0
    emissions_g: float = 0.0
    counterfactual_g: float = 0.0
    unpriced_energy_j: float = 0.0
    """Energy spent with no carbon intensity known (emissions unknown while > 0)."""
    tokens: int = 0
    resume_at: str | None = None
    finished: bool = False
    deadline_warned: bool = False
    """The 'deadline will be missed' line was printed: a relaunch does not print it again."""
    measured_energy_j: float = 0.0
    measured_running_s: float = 0.0
    """The measured steps' energy and job-clock time: a relaunch plans with the power already measured."""
    clock_at: str | None = None
    """The job clock's time when this was written: a simulated calendar (``ReplayClock``) continues from it."""
    deadline_given: str | None = None
    """The deadline as the user gave it ('+12', an ISO time): the same value again keeps ``deadline``, another
    replaces it."""
    lost_steps: int = 0
    """Steps run after the last complete checkpoint by processes that were interrupted: redone, not progress."""
    lost_energy_j: float = 0.0
    """Energy those processes spent after their last complete checkpoint (included in ``energy_j``)."""
    uncommitted: dict[str, float] | None = None
    """The last interrupted process's progress past ``steps_done`` (its ``steps_done``, ``running_s``,
    ``tokens``, ``counterfactual_g`` and the ``lost_energy_j`` it added): a program that saved those steps on
    its own gets them back when the checkpoint it resumes from holds them."""

    @staticmethod
    def parse_time(value: str | None) -> datetime | None:
        return datetime.fromisoformat(value) if value else None


def save_state(state: EngineState, path: str | Path) -> None:
    """Write ``state`` atomically."""
    path = Path(path)
    payload = {"version": _VERSION, **asdict(state)}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise ConfigError(f"state file {path}: cannot write ({e.strerror})") from None


def load_state(path: str | Path, job: str) -> EngineState | None:
    """Read the state of ``job``; None when absent, finished, or of another job."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        payload = load_json(path, what="state file")
    except ConfigError as e:
        raise ConfigError(f"{e}; delete it to start the job afresh") from None
    if not isinstance(payload, dict):
        raise ConfigError(f"{path}: state file is not a JSON object; delete it to start the job afresh")
    if payload.pop("version", None) != _VERSION:
        raise ConfigError(f"state file {path}: unknown version; delete it to start the job afresh")
    fields: dict[str, Any] = payload  # the file's values as written: a wrong name is caught here, not a type
    try:
        state = EngineState(**fields)
    except TypeError as e:
        raise ConfigError(f"state file {path}: {e}; delete it to start the job afresh") from None
    if state.job != job or state.finished:
        return None
    return state


def deadline_spec(value: datetime | str | None) -> str | None:
    """A deadline setting as it is stored in ``deadline_given`` (None when none was given)."""
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value).strip()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def state_of(engine: Engine, job: str, *, resume_at: datetime | None, finished: bool,
             deadline_given: str | None = None) -> EngineState:
    """Capture what a relaunch of ``job`` needs from ``engine`` (``deadline_given``: the deadline as the user
    gave it)."""
    stats = engine.io.job_stats.snapshot()
    progress, ledger = engine.progress, engine.ledger
    return EngineState(
        job=job, deadline=_iso(engine.deadline.at), first_start=_iso(progress.first_start),
        submitted_at=_iso(progress.submitted_at), steps_done=progress.steps_done, running_s=progress.running_s,
        step_time_s=progress.times.mean_s, energy_j=ledger.energy_j, emissions_g=ledger.emissions_g,
        counterfactual_g=ledger.counterfactual_g, unpriced_energy_j=ledger.unpriced_energy_j,
        tokens=stats.tokens_total, resume_at=_iso(resume_at),
        finished=finished, deadline_warned=engine.deadline.watch.warned,
        measured_energy_j=progress.measured_energy_j, measured_running_s=progress.measured_running_s,
        clock_at=_iso(engine.clock.now()), deadline_given=deadline_given,
    )


def restore_into(engine: Engine, prior: EngineState) -> None:
    """Carry totals and the time axis of the previous run into a freshly built engine (each part restores
    its own)."""
    engine.progress.restore(running_s=prior.running_s, first_start=EngineState.parse_time(prior.first_start),
                            submitted_at=EngineState.parse_time(prior.submitted_at),
                            measured=(prior.measured_energy_j, prior.measured_running_s))
    engine.deadline.restore(warned=prior.deadline_warned)
    engine.adopter.continuing = EngineState.parse_time(prior.resume_at)  # a relaunch inside a checkpoint pause
    engine.ledger.restore(energy_j=prior.energy_j, emissions_g=prior.emissions_g,
                          counterfactual_g=prior.counterfactual_g, unpriced_energy_j=prior.unpriced_energy_j)
    stats = engine.io.job_stats
    priced_j = prior.energy_j - prior.unpriced_energy_j
    stats.add(steps=engine.progress.steps_done, tokens=prior.tokens, energy_j=priced_j,
              emissions_g=prior.emissions_g, emissions_avoided_g=prior.counterfactual_g - prior.emissions_g)
    if prior.unpriced_energy_j > 0:
        stats.add(energy_j=prior.unpriced_energy_j, emissions_g=None)
        stats.update(emissions_unknown_reason="no carbon intensity known for part of an earlier run")
