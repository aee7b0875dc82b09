"""Settings a policy file carries for the engine (not for ``decide``).

``[settings]`` in a policy TOML becomes ``policy.settings``: how to pause
(checkpoint and exit, or suspend in-process), what a resume costs, and what
to do when the deadline cannot be met.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from greentrain.errors import ConfigError

__all__ = ["DEADLINE_POLICIES", "PAUSE_MODES", "DeadlinePolicy", "PauseMode", "PolicySettings"]

PauseMode = Literal["checkpoint", "suspend", "auto"]
"""How a job pauses: declared here once; ``JobOptions.pause_mode`` and a policy file's ``[settings]`` take it."""
DeadlinePolicy = Literal["strict", "best-effort"]
"""What a deadline shorter than the work means: declared here once, as ``PauseMode``."""
PAUSE_MODES: tuple[str, ...] = get_args(PauseMode)
DEADLINE_POLICIES: tuple[str, ...] = get_args(DeadlinePolicy)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    """Engine-facing configuration of a loaded policy."""

    pause_mode: PauseMode = "checkpoint"
    """'checkpoint': save, leave the step loop, resume later; 'suspend': keep the process, idle the GPU;
    'auto': per pause, release (checkpoint) when a relauncher exists and holding would cost more."""
    resume_overhead_s: float | None = None
    """Time lost per resume (restore, warm-up) at full power; None = the engine measures or assumes its default."""
    deadline_policy: DeadlinePolicy = "strict"
    """'strict': a deadline shorter than the work is an error; 'best-effort': warn and run now."""
    waiting_power_w: float | None = None
    """Draw while paused, watts, instead of the held devices' measured idle draw (0 when released)."""
    max_emissions_g: float | None = None
    """Carbon budget of the job, grams CO2eq (``greentrain.engine.budget``)."""
    max_energy_j: float | None = None
    """Energy budget of the job, joules."""
    on_budget: str = "stop"
    """When a budget is exceeded: 'stop' (checkpoint when spent, exit status 4), 'warn' (warn once, carry on) or
    'shift' (while projected over budget, take every pause with a positive expected net saving)."""

    def __post_init__(self) -> None:
        if self.pause_mode not in PAUSE_MODES:
            raise ConfigError(f"pause_mode: {self.pause_mode!r} is not one of {', '.join(PAUSE_MODES)}")
        if self.deadline_policy not in DEADLINE_POLICIES:
            raise ConfigError(
                f"deadline_policy: {self.deadline_policy!r} is not one of {', '.join(DEADLINE_POLICIES)}"
            )
        for name, value, low in (("waiting_power_w", self.waiting_power_w, 0.0),
                                 ("max_emissions_g", self.max_emissions_g, None),
                                 ("max_energy_j", self.max_energy_j, None)):
            ok = isinstance(value, int | float) and not isinstance(value, bool) and (
                low is not None and low <= value < math.inf or low is None and 0 < value < math.inf)
            if value is not None and not ok:
                raise ConfigError(f"{name}: must be a number {'>= 0' if low is not None else '> 0'}, got {value!r}")
        if self.on_budget not in ("stop", "warn", "shift"):
            raise ConfigError(f"on_budget: {self.on_budget!r} is not 'stop', 'warn' or 'shift'")
        if self.resume_overhead_s is not None and not 0 <= self.resume_overhead_s < 86400:
            raise ConfigError(f"resume_overhead_s: must be in [0, 86400) seconds, got {self.resume_overhead_s}")
