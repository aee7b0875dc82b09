"""The carbon-aware policy: forecast-optimal timing and the operating point, planned together.

The same plan as ``forecast-optimal`` (``greentrain.policies.forecast_optimal``),
but the DP also chooses, per interval, among the job's measured operating
points (power limits), so a job may run slower and cooler in a dirty hour
rather than pause through it, whichever emits less net of waiting and resume.
For an elastic job (a ``Snapshot`` with a scaling profile) it chooses a
replica count per interval instead (``greentrain.policies.scaling``): 0 is a
pause, and every change of count pays its restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.policies.base import Decision, Snapshot
from greentrain.policies.calibrate import calibrated
from greentrain.policies.forecast_optimal import ForecastOptimalConfig, ForecastOptimalPolicy
from greentrain.policies.scaling import decide_scaling

__all__ = ["CarbonAwareConfig", "CarbonAwarePolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CarbonAwareConfig(ForecastOptimalConfig):
    """Forecast-optimal's parameters; the DP also chooses among operating points, or, for an elastic job
    with a scaling profile, among replica counts."""

    min_change_saving: float = 0.02
    """Margin for forecast error on a replica change: change the count of a running job only if the
    expected net saving (its restart included) exceeds this fraction of what the current interval would
    emit at the current count."""

    def __post_init__(self) -> None:
        super(CarbonAwareConfig, self).__post_init__()
        if not 0 <= self.min_change_saving <= 1:
            raise ConfigError(f"min_change_saving: must be in [0, 1] (a fraction), got {self.min_change_saving}")


class CarbonAwarePolicy(ForecastOptimalPolicy):
    """Per interval: pause, or run at the operating point (or, with a scaling profile, the replica count)
    that minimises expected emissions."""

    name = "carbon-aware"
    Config = CarbonAwareConfig
    power_use = "timing+power"

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        if snapshot.scaling is not None:
            now = ensure_aware_utc(now, "now")
            decision = decide_scaling(self.config, self.name, calibrated(snapshot, now), now)
            if decision is not None:
                return decision
        return super().decide(snapshot, now)
