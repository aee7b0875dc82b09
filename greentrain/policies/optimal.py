"""Where the forecast-optimal and carbon-aware policies were first published; kept so that
``from greentrain.policies.optimal import CarbonAwarePolicy`` (and policy entry points naming this module)
go on working. The policies live in ``forecast_optimal.py`` and ``carbon_aware.py``."""

from __future__ import annotations

from greentrain.policies.carbon_aware import CarbonAwareConfig, CarbonAwarePolicy
from greentrain.policies.forecast_optimal import ForecastOptimalConfig, ForecastOptimalPolicy

__all__ = ["CarbonAwareConfig", "CarbonAwarePolicy", "ForecastOptimalConfig", "ForecastOptimalPolicy"]
