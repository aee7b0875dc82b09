"""Carbon-intensity signals: providers, cache, fallback chain and forecaster.

``make_provider(spec)`` builds one provider; ``SignalChain`` puts several in
order with caching and fallback; ``Forecaster`` predicts hours a provider
does not cover. Everything returns ``IntensityPoint``s labelled with kind,
provider, zone and emission factor.

Here: the point and provider types (``base``), the chain with its cache and
backoff (``chain``, ``cache``, ``backoff``) and reading CSV traces (``trace``,
``shipped``). In subpackages: ``providers/`` (each source, and building them by
name), ``transport/`` (the bounded HTTP client, secrets and redaction),
``forecast/`` (the forecasters and their measured error) and ``archive/`` (the
forecast archive).
"""

from __future__ import annotations

from greentrain.signals.base import (
    CarbonIntensityProvider,
    EmissionFactor,
    IntensityPoint,
    Kind,
    ProviderStatus,
)
from greentrain.signals.chain import SignalChain
from greentrain.signals.forecast.forecaster import Forecaster, SeasonalNaiveForecaster
from greentrain.signals.providers.registry import make_provider, provider_names

__all__ = [
    "CarbonIntensityProvider",
    "EmissionFactor",
    "IntensityPoint",
    "Kind",
    "ProviderStatus",
    "SignalChain",
    "Forecaster",
    "SeasonalNaiveForecaster",
    "make_provider",
    "provider_names",
]
