"""Resolve the Session's options against the policy's settings and a relaunched job's saved state."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from greentrain.clock import ensure_aware_utc, parse_deadline
from greentrain.errors import ConfigError
from greentrain.policies.base import Policy
from greentrain.job.state import EngineState

__all__ = ["STATE_ENV", "load_policy_spec", "resolve_pause_mode", "resolve_deadline", "default_state_path",
           "planning_step_time_s"]

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


def resolve_deadline(value: datetime | str | None, prior: EngineState | None, now: datetime) -> datetime | None:
    """An aware deadline; '+H' counts from the job's first start (kept in ``prior``), not a relaunch."""
    relative = value is None or (isinstance(value, str) and value.strip().startswith("+"))
    if prior is not None and prior.deadline and relative:
        return EngineState.parse_time(prior.deadline)
    if value is None:
        return None
    if isinstance(value, datetime):
        return ensure_aware_utc(value, "deadline")
    return parse_deadline(str(value), now, param="deadline")


def default_state_path(checkpoint_dir: str | Path | None) -> Path | None:
    """Where the job's deadline and totals survive a relaunch."""
    if checkpoint_dir is not None:
        return Path(checkpoint_dir) / "greentrain-state.json"
    env = os.environ.get(STATE_ENV)
    return Path(env) if env else None


def planning_step_time_s(prior: EngineState | None, hint_s: float | None) -> float | None:
    """The step time to plan with before one is measured: the slower of the previous run's measurement and
    the caller's hint. A hint from a short timing on a loaded machine can be several times too fast, and a
    relaunch that trusted it would plan its wait as if the job were short."""
    known = [v for v in ((prior.step_time_s if prior else None), hint_s) if v]
    return max(known) if known else None
