"""Build providers by name: ``make_provider('electricitymaps')``, ``make_provider('csv:trace.csv')``.

Every provider, built-in or third-party, is an entry in the ``greentrain.providers``
plugin family (``greentrain.plugins``); the built-ins are declared in pyproject.toml.
"""

from __future__ import annotations

import inspect
from datetime import datetime
from pathlib import Path

from greentrain import plugins
from greentrain.clock import Clock, ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.signals.base import CarbonIntensityProvider
from greentrain.signals.cache import CachedProvider
from greentrain.signals.shipped import resolve_trace, trace_names_hint

__all__ = ["make_provider", "provider_names"]


def provider_names() -> list[str]:
    """Every provider name: built-ins and installed plugins."""
    return sorted(plugins.available("providers"))


def make_provider(
    spec: str,
    *,
    clock: Clock | None = None,
    api_base: str | None = None,
    cache_dir: Path | None = None,
    ttl_s: float = 300.0,
    **options: object,
) -> CarbonIntensityProvider:
    """A provider from ``spec`` ('electricitymaps', 'watttime', 'ukgrid', 'static' or 'csv:PATH'; 'csv:GB_2022'
    names a trace greentrain ships, ``greentrain.signals.shipped``).

    ``options`` go to the provider (CSV: ``column``, ``replay_start``, ``speedup``).
    With ``cache_dir`` the provider is wrapped in an on-disk TTL cache.
    """
    name, _, argument = spec.partition(":")
    name = name.strip().lower()
    if name == "csv":
        if not argument:
            raise ConfigError("provider 'csv' needs a path: csv:PATH (an Electricity Maps CSV export) or a shipped "
                              f"trace ({trace_names_hint()})")
        argument = str(resolve_trace(argument))  # a shipped trace by name, from any directory
        replay_start = options.get("replay_start")
        if isinstance(replay_start, str):
            options["replay_start"] = ensure_aware_utc(datetime.fromisoformat(replay_start), "replay_start")
    elif argument:
        raise ConfigError(f"provider {spec!r}: only 'csv' takes ':PATH'")
    cls = plugins.load("providers", name)
    if api_base is not None:
        if "api_base" not in inspect.signature(cls).parameters:
            raise ConfigError(f"api_base: provider {name!r} does not use HTTP")
        options["api_base"] = api_base
    try:
        provider = cls(argument, clock=clock, **options) if name == "csv" else cls(clock=clock, **options)
    except TypeError as e:
        raise ConfigError(f"provider {name!r}: bad option ({e})") from None
    except ConfigError as e:
        if name == "csv" and "\n" not in str(e):  # unreadable or not a trace: where the shipped ones are
            raise ConfigError(f"{e}; shipped traces: {trace_names_hint()}") from None
        raise
    if cache_dir is not None:
        return CachedProvider(provider, clock=clock, ttl_s=ttl_s, cache_dir=cache_dir, key_prefix=api_base or "")
    return provider
