"""Resolve a Session's pause mode, policy and state file (the deadline and step time: ``job.build``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError
from greentrain.job.state import STATE_FILE_NAME
from greentrain.policies.base import Policy

__all__ = ["STATE_ENV", "load_policy_spec", "resolve_pause_mode", "default_state_path"]

STATE_ENV = "GREENTRAIN_STATE_FILE"


def load_policy_spec(spec: str | Path | Policy) -> Policy:
    """A Policy from a preset name, a TOML path, or a Policy object."""
    if isinstance(spec, Policy):
        return spec
    from greentrain.policies import load_policy

    return load_policy(spec)


def resolve_pause_mode(requested: str | None, settings: Any, has_checkpoint: bool) -> str:
    """The pause mode: as requested, else the policy's setting where this job can honour it."""
    mode = requested
    if mode is None:
        mode = getattr(settings, "pause_mode", None) or "checkpoint"
        if mode == "checkpoint" and not has_checkpoint:
            mode = "suspend"
    if mode not in ("checkpoint", "suspend", "auto"):
        raise ConfigError(f"pause_mode: {mode!r} is not 'checkpoint', 'suspend' or 'auto'")
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
