"""The carbon-aware policy: forecast-optimal timing and the operating point, planned together.

The same plan as ``forecast-optimal`` (``greentrain.policies.forecast_optimal``),
but the DP also chooses, per interval, among the job's measured operating
points (power limits), so a job may run slower and cooler in a dirty hour
rather than pause through it, whichever emits less net of waiting and resume.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.policies.forecast_optimal import ForecastOptimalConfig, ForecastOptimalPolicy

__all__ = ["CarbonAwareConfig", "CarbonAwarePolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CarbonAwareConfig(ForecastOptimalConfig):
    """Same parameters as forecast-optimal; the DP also chooses among operating points."""


class CarbonAwarePolicy(ForecastOptimalPolicy):
    """Per interval: pause, or run at the operating point that minimises expected emissions."""

    name = "carbon-aware"
    Config = CarbonAwareConfig
    power_use = "timing+power"
