"""Forecast-optimal timing and the carbon-aware (timing × power) policy.

At every decision the policy plans the rest of the job over the known and
forecast intensity up to the deadline with ``plan_schedule`` (a DP over run /
pause and, for ``carbon-aware``, every measured operating point, with the
resume overhead charged), commits only to the current interval, and re-plans
at the next one as measurements and forecasts update. The plan covers the
remaining work plus a safety margin from the measured step-time spread; the
margin can only shrink the options when the deadline is tight, and if even
flat-out running no longer fits the policy runs flat out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.policies.base import Decision, Snapshot
from greentrain.policies.configured import ConfiguredPolicy
from greentrain.policies.planner import plan_schedule
from greentrain.policies.window import (
    capacity_s,
    fastest,
    horizon_end,
    intensity_slots,
    modes_of,
    pause_decision,
    run_decision,
    safety_margin_s,
    start_state,
)

__all__ = ["CarbonAwareConfig", "CarbonAwarePolicy", "ForecastOptimalConfig", "ForecastOptimalPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ForecastOptimalConfig:
    """Parameters of the forecast-optimal planner."""

    safety_z: float = 2.0
    """Plan for steps this many standard deviations (measured) slower than their mean."""
    reserve_s: float = 0.0
    """Fixed time kept free before the deadline, seconds."""
    max_bins: int = 1500
    """Resolution of remaining work in the DP (more = finer, slower)."""

    def __post_init__(self) -> None:
        if not 0 <= self.safety_z <= 10:
            raise ConfigError(f"safety_z: must be in [0, 10] standard deviations, got {self.safety_z}")
        if self.reserve_s < 0:
            raise ConfigError(f"reserve_s: must be >= 0 seconds, got {self.reserve_s}")
        if not 50 <= self.max_bins <= 100_000:
            raise ConfigError(f"max_bins: must be in [50, 100000], got {self.max_bins}")


class ForecastOptimalPolicy(ConfiguredPolicy):
    """Minimum expected emissions by run/pause slots, deadline guaranteed, re-planned each interval."""

    name = "forecast-optimal"
    Config = ForecastOptimalConfig
    use_power = False

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        now = ensure_aware_utc(now, "now")
        modes = modes_of(snapshot, power=self.use_power)
        top = fastest(modes)
        work_s = max(snapshot.work_remaining_s, 0.0)
        end = horizon_end(snapshot, now)
        slots = intensity_slots(snapshot, now, end) if end is not None else []
        if end is not None and end <= now:
            return run_decision(top, now, work_s, f"{self.name}: deadline reached; running flat out", to_the_end=True)
        if work_s <= 0 or not slots:
            return run_decision(top, now, work_s, f"{self.name}: nothing to plan (no work or no carbon signal)")
        room_s = capacity_s(snapshot, now, end, top.speed)
        if room_s < work_s:
            return run_decision(top, now, work_s, f"{self.name}: deadline cannot be met; running flat out",
                                to_the_end=True)
        margin_s = safety_margin_s(snapshot, self.config.safety_z, self.config.reserve_s)
        plan = plan_schedule(
            slots,
            min(work_s + margin_s, room_s),
            modes,
            overhead_s=snapshot.resume_overhead_s,
            overhead_power_w=top.power_w,
            state=start_state(snapshot),
            max_bins=self.config.max_bins,
            memo=self.__dict__.setdefault("_memo", {}),  # a cache only: output depends on inputs alone
        )
        if plan is None:
            return run_decision(top, now, work_s, f"{self.name}: no slack left; running flat out", to_the_end=True)
        intervals = plan.running_intervals()
        first = plan.modes[0]
        if first is None:
            # No time in the reason: the announcement says when (the plan's first running interval);
            # ``until`` is only when this policy looks again.
            reason = f"{self.name}: {slots[0].intensity_g_per_kwh:.0f} g/kWh now, cleaner hours ahead"
            return pause_decision(snapshot, slots[0].end, reason, intervals)
        reason = f"{self.name}: run this interval at {slots[0].intensity_g_per_kwh:.0f} g/kWh"
        if self.use_power and first.power_limit_w is not None:
            reason += f", {first.power_limit_w:.0f} W limit"
        return run_decision(first, now, work_s, reason, until=slots[0].end, plan=intervals)


@dataclass(frozen=True, slots=True, kw_only=True)
class CarbonAwareConfig(ForecastOptimalConfig):
    """Same parameters as forecast-optimal; the DP also chooses among operating points."""


class CarbonAwarePolicy(ForecastOptimalPolicy):
    """Per interval: pause, or run at the operating point that minimises expected emissions."""

    name = "carbon-aware"
    Config = CarbonAwareConfig
    use_power = True
