"""Settings a policy file carries for the engine (not for ``decide``).

``[settings]`` in a policy TOML becomes ``policy.settings``: how to pause
(checkpoint and exit, or suspend in-process), what a resume costs, and what
to do when the deadline cannot be met.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.errors import ConfigError

__all__ = ["DEADLINE_POLICIES", "PAUSE_MODES", "PolicySettings"]

PAUSE_MODES = ("checkpoint", "suspend", "auto")
DEADLINE_POLICIES = ("strict", "best-effort")


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    """Engine-facing configuration of a loaded policy."""

    pause_mode: str = "checkpoint"
    """'checkpoint': save, leave the step loop, resume later; 'suspend': keep the process, idle the GPU;
    'auto': per pause, release (checkpoint) when a relauncher exists and holding would cost more."""
    resume_overhead_s: float | None = None
    """Time lost per resume (restore, warm-up) at full power; None = the engine measures or assumes its default."""
    deadline_policy: str = "strict"
    """'strict': a deadline shorter than the work is an error; 'best-effort': warn and run now."""

    def __post_init__(self) -> None:
        if self.pause_mode not in PAUSE_MODES:
            raise ConfigError(f"pause_mode: {self.pause_mode!r} is not one of {', '.join(PAUSE_MODES)}")
        if self.deadline_policy not in DEADLINE_POLICIES:
            raise ConfigError(
                f"deadline_policy: {self.deadline_policy!r} is not one of {', '.join(DEADLINE_POLICIES)}"
            )
        if self.resume_overhead_s is not None and not 0 <= self.resume_overhead_s < 86400:
            raise ConfigError(f"resume_overhead_s: must be in [0, 86400) seconds, got {self.resume_overhead_s}")
