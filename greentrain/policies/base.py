"""Policies: pure functions from what we know now to what to do next.

``Policy.decide(snapshot, now)`` reads only its arguments — never a clock, a
file or the network — so the live engine and the simulator run the very same
code. The engine builds the ``Snapshot`` at each step boundary and applies the
``Decision`` before the next step.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import ClassVar, Literal

from greentrain.errors import ConfigError
from greentrain.jobstats import JobState
from greentrain.policies.scaling_profile import ScalingProfile
from greentrain.policies.settings import PolicySettings
from greentrain.signals.base import IntensityPoint

__all__ = ["Action", "Decision", "OperatingPoint", "Policy", "PowerUse", "Snapshot"]

PowerUse = Literal["none", "power", "timing+power"]
"""How a policy uses the GPU's operating points (``Policy.power_use``)."""


class Action(StrEnum):
    """Timing action."""

    RUN = "run"
    PAUSE = "pause"  # stop stepping until ``Decision.until`` (checkpoint or suspend)
    DELAY_START = "delay_start"  # not started yet; start at ``Decision.until``
    STOP = "stop"  # the engine's, never a policy's: a budget is spent; save a checkpoint and exit


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatingPoint:
    """A measured GPU setting: how fast the job runs there and what it draws."""

    power_limit_w: float | None = None
    sm_clocks_mhz: tuple[int, int] | None = None
    relative_speed: float = 1.0
    """Progress rate relative to the fastest point (1.0 = full speed)."""
    power_w: float = 0.0
    """Whole-job draw at this point, watts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """Everything a policy may know at a step boundary."""

    steps_done: int = 0
    steps_total: int | None = None
    work_remaining_s: float
    """Running time still needed at full speed (fastest operating point), seconds: at the robust rate."""
    work_remaining_upper_s: float | None = None
    """The same at the pessimistic rate (``policies/rate.py``); None: unknown (planners then use
    ``step_time_std_s``). Planners keep room for it before the deadline."""
    step_time_s: float | None = None
    """Measured mean step time at current settings."""
    step_time_std_s: float = 0.0
    power_w: float | None = None
    """Whole-job draw at current settings, watts per job-clock second of running: measured from the job's
    steps (the energy the summary prices), else the devices' reading at start."""
    forecast_error_g_per_kwh: tuple[float, ...] = ()
    """Typical (median absolute) error of the forecast by hours ahead (index 0: one hour ahead), measured
    from this signal's earlier forecasts; empty when not measured yet. The wait gate reports how likely a
    wait is to beat running now with it (``policies/worth.py``)."""
    forecast_bias_g_per_kwh: tuple[float, ...] = ()
    """The forecast's measured bias by hours ahead (forecast minus actual, index 0: one hour ahead; only
    what stands out of the noise, ``signals/forecast/liveskill.py``); empty when none is measured. Planners subtract
    it (``policies/calibrate.py``)."""
    carbon_now: IntensityPoint | None = None
    forecast: tuple[IntensityPoint, ...] = ()
    """Future points in time order (may start with the current interval)."""
    deadline: datetime | None = None
    resume_overhead_s: float = 0.0
    """Time lost (at full power, no progress) each time a pause ends."""
    state: JobState = JobState.WAITING
    started_at: datetime | None = None
    operating_points: tuple[OperatingPoint, ...] = ()
    """Measured profile; empty when not profiled (then only timing is decided)."""
    current_power_limit_w: float | None = None
    precision: str | None = None
    waiting_power_w: float = 0.0
    """What the job draws while paused after its first start, watts: the held devices' idle
    draw for a suspend or an in-process checkpoint wait, 0 when the hardware is released.
    Waiting before the first start is always free. Planners charge it to every pause."""
    scaling: ScalingProfile | None = None
    """An elastic job's measured throughput and power per replica count (carbon scaling); None = fixed size."""
    replicas: int = 0
    """Replicas running now (0 = paused, released or not started)."""
    work_replicas: int | None = None
    """The replica count ``work_remaining_s`` is counted at (with ``scaling``): the job needs that many seconds
    of running at this count. None = ``replicas``."""
    min_replicas: int = 1
    """Fewest replicas the job may run at (0, a pause, is always allowed)."""
    max_replicas: int | None = None
    """Most replicas the job may run at; None = the profile's largest count."""

    def __post_init__(self) -> None:
        if not (isinstance(self.waiting_power_w, int | float) and 0 <= self.waiting_power_w < math.inf):
            raise ConfigError(f"waiting_power_w: must be a number >= 0 watts, got {self.waiting_power_w!r}")
        if self.replicas < 0 or self.min_replicas < 1:
            raise ConfigError(f"replicas: must be >= 0 (min_replicas >= 1), got {self.replicas} "
                              f"(min_replicas {self.min_replicas})")
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise ConfigError(f"max_replicas: {self.max_replicas} is below min_replicas {self.min_replicas}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What to do at this step boundary. ``None`` fields mean 'leave as is'."""

    action: Action = Action.RUN
    until: datetime | None = None
    """For PAUSE / DELAY_START: when to re-evaluate or resume."""
    power_limit_w: float | None = None
    sm_clocks_mhz: tuple[int, int] | None = None
    precision: str | None = None
    reason: str = ""
    plan: tuple[tuple[datetime, datetime], ...] = field(default=())
    """Planned running intervals, for display and metrics (optional)."""
    saving_g: float | None = None
    """For PAUSE / DELAY_START: the wait's expected net saving, grams CO2eq (what running now would emit
    minus the waiting and the later running and resume), on the forecast less its measured bias; None when
    the policy does not say. The engine's gate (``policies/worth.py``) weighs it against the job's emissions."""
    plan_saving_g: float | None = None
    """The whole plan's expected saving against running flat out from now, grams CO2eq, priced with the
    snapshot's power (the job's measured power: the same model as the summary's grams); None: not planned."""
    to_the_end: bool = False
    """RUN with no slack left for any pause: the engine then refuses later pauses, so the reason
    ('running flat out') stays true."""
    replicas: int | None = None
    """Carbon scaling: the replica count to run at from now (0 = paused or released); None = leave as is."""


class Policy(ABC):
    """Decides timing (and optionally power/precision) from a Snapshot."""

    name: ClassVar[str] = "custom"
    """The policy's kind in logs and summaries (a built-in's preset name; a plugin sets its own)."""
    Config: ClassVar[type | None] = None
    """The dataclass of a policy file's parameters (``ConfiguredPolicy``); None: it takes none."""
    power_use: ClassVar[PowerUse] = "none"
    """The one declaration of power use, read by the loader and the job builder:
    "none" decides timing only; "power" picks the operating point only (it may fill a
    policy file's ``[power]`` table); "timing+power" plans timing and the operating point
    together (it refuses a ``[power]`` table). Anything but "none" makes ``power="auto"``
    measure operating points."""
    settings: PolicySettings = PolicySettings()
    """Engine-facing config (pause mode, resume overhead, deadline policy); set by ``load_policy``."""

    @abstractmethod
    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        """Pure: same inputs, same Decision."""
