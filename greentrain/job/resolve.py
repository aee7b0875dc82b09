"""Resolve a Session's pause mode and state file (the deadline and step time: ``job.build``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.job.options import PauseMode
from greentrain.job.state import STATE_FILE_NAME
from greentrain.policies.settings import PolicySettings

__all__ = ["STATE_ENV", "resolve_pause_mode", "default_state_path", "fresh_exec_state_path"]

STATE_ENV = "GREENTRAIN_STATE_FILE"


def resolve_pause_mode(requested: PauseMode | None, settings: PolicySettings, has_checkpoint: bool) -> PauseMode:
    """The pause mode: as requested, else the policy's setting where this job can honour it (both were
    checked where they were given: ``JobOptions``, the policy file)."""
    mode = requested
    if mode is None:
        mode = settings.pause_mode
        if mode == "checkpoint" and not has_checkpoint:
            mode = "suspend"
    if mode == "checkpoint" and not has_checkpoint:
        raise ConfigError("pause_mode 'checkpoint' needs save=/load= or model= with checkpoint_dir=; "
                          "or use pause_mode='suspend'")
    return mode


def default_state_path(checkpoint_dir: str | Path | None) -> Path | None:
    """Where the job's deadline and totals survive a relaunch."""
    if checkpoint_dir is not None:
        return Path(checkpoint_dir) / STATE_FILE_NAME
    env = os.environ.get(STATE_ENV)
    return Path(env) if env else None


def fresh_exec_state_path(job: str) -> Path:
    """The state file of a one-process job that re-execs itself (exec keeps the pid, and the relaunch is told
    this path in ``GREENTRAIN_STATE_FILE``). A file already there was left by another process that had this
    pid (containers reuse pid 1), not by this job: it is removed, never resumed."""
    path = Path(tempfile.gettempdir()) / f"greentrain-{job}-{os.getpid()}.json"
    path.unlink(missing_ok=True)
    return path
