"""Settings a policy file carries for the engine (not for ``decide``).

``[settings]`` in a policy TOML becomes ``policy.settings``: how to pause
(checkpoint and exit, or suspend in-process), what a resume costs, and what
to do when the deadline cannot be met.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, get_args

from greentrain.errors import ConfigError

__all__ = ["DEADLINE_POLICIES", "PAUSE_MODES", "DeadlinePolicy", "PauseMode", "PolicySettings", "budget_problems"]

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
        for name, why in budget_problems(waiting_power_w=self.waiting_power_w, max_emissions_g=self.max_emissions_g,
                                         max_energy_j=self.max_energy_j):
            raise ConfigError(f"{name}: {why}")
        if self.on_budget not in ("stop", "warn", "shift"):
            raise ConfigError(f"on_budget: {self.on_budget!r} is not 'stop', 'warn' or 'shift'")
        if self.resume_overhead_s is not None and not 0 <= self.resume_overhead_s < 86400:
            raise ConfigError(f"resume_overhead_s: must be in [0, 86400) seconds, got {self.resume_overhead_s}")


def _number(value: object, *, zero_ok: bool) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and (
        value >= 0 if zero_ok else value > 0)


def budget_problems(*, waiting_power_w: object, max_emissions_g: object,
                    max_energy_j: object) -> Iterator[tuple[str, str]]:
    """``(setting, why)`` for a bad waiting draw or budget: the one check of these settings, which a job
    (``JobOptions``) and a policy file's ``[settings]`` both declare."""
    if waiting_power_w is not None and not _number(waiting_power_w, zero_ok=True):
        yield "waiting_power_w", f"must be a number of watts >= 0, got {waiting_power_w!r}"
    for name, value in (("max_emissions_g", max_emissions_g), ("max_energy_j", max_energy_j)):
        if value is not None and not _number(value, zero_ok=False):
            yield name, f"must be a number > 0, got {value!r}"
