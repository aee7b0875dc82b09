"""Build the resources a job needs (carbon signal, energy monitor, metrics endpoint) from its options.

Each builder imports its package lazily (monitor, signals, exporters are
written as separate packages) and turns a missing or failing piece into a
clear ``ConfigError`` (bad input) or a logged degradation (measurement is
optional: training goes on without it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from greentrain.clock import Clock
from greentrain.device.discovery import DeviceSet
from greentrain.engine.collaborators import CarbonSignal, NoMonitor
from greentrain.errors import ConfigError
from greentrain.events import EventLog
from greentrain.job.options import ProviderSpec
from greentrain.signals.base import CarbonIntensityProvider

if TYPE_CHECKING:
    from greentrain.exporters.server import MetricsServer
    from greentrain.monitor import Monitor

__all__ = ["build_signals", "build_monitor", "start_metrics", "close_all"]

log = logging.getLogger("greentrain.session")

MakeProvider = Callable[..., CarbonIntensityProvider]
"""``greentrain.signals.make_provider``: a provider from its spec."""


def build_signals(zone: str | None, provider: ProviderSpec | None, clock: Clock) -> CarbonSignal | None:
    """A SignalChain-like object (``latest()``, ``forecast(horizon_h=)``, ``status()``), or None for no signal."""
    if provider is None and zone is None:
        return None
    if zone is not None and (provider is None or isinstance(provider, str)):
        from greentrain.signals.providers.zones import require_zone

        require_zone(zone, provider, "zone")
    if provider is not None and not isinstance(provider, (str, CarbonIntensityProvider)):
        if not isinstance(provider, CarbonSignal):
            raise ConfigError(f"provider: {type(provider).__name__} has no latest(), forecast() and status(); "
                              "pass a spec or a SignalChain")
        return provider  # already a chain
    try:
        from greentrain.signals import make_provider
        from greentrain.signals.chain import SignalChain
        from greentrain.signals.providers.csvtrace import CSVTraceProvider
    except ImportError as e:
        raise ConfigError(f"provider: the signals package is not available ({e})") from None
    if isinstance(provider, CarbonIntensityProvider):
        providers = [provider]
    elif provider is not None:
        providers = [_make(make_provider, provider, clock)]
        trace = providers[0]
        why = trace.zone_mismatch(zone) if zone is not None and isinstance(trace, CSVTraceProvider) else None
        if why is not None:  # a trace of another zone: refused before any work, not at every fetch
            providers[0].close()
            raise ConfigError(f"zone: {why}")
    else:
        providers = _default_providers(make_provider, clock)
    return SignalChain(providers, zone=zone or _zone_of(providers[0]), clock=clock)


def _make(make_provider: MakeProvider, spec: str, clock: Clock) -> CarbonIntensityProvider:
    # A CSV trace is read at the clock's own time (a ReplayClock inside the trace's year replays it
    # as is; wall time maps to the same date in that year), so trace and job clock never drift apart.
    return make_provider(spec, clock=clock)


def _default_providers(make_provider: MakeProvider, clock: Clock) -> list[CarbonIntensityProvider]:
    providers: list[CarbonIntensityProvider] = []
    live = make_provider("electricitymaps", clock=clock)
    if live.configured():
        providers.append(live)
    providers.append(make_provider("static", clock=clock))
    return providers


def _zone_of(provider: CarbonIntensityProvider) -> str:
    """The zone of a trace (its file says); "" for a provider that serves any zone."""
    from greentrain.signals.providers.csvtrace import CSVTraceProvider

    return provider.zone if isinstance(provider, CSVTraceProvider) else ""


SAMPLE_EVENT_INTERVAL_S = 10.0
"""Real seconds between a job's ``sample`` events: every pass (10 Hz) wrote ~2 KB per device a second to the
run log; the power series the report draws needs far less (the job's totals never depend on it)."""


def build_monitor(devices: DeviceSet | None, event_log: EventLog,
                  clock: Clock | None = None) -> tuple[Monitor | NoMonitor, DeviceSet | None]:
    """Start a Monitor over ``devices`` (None: discovered); ``NoDevices`` measures nothing (``NoMonitor``).

    ``clock`` stamps the monitor's JSONL samples with the job's time (a replayed calendar included).
    """
    if devices is not None and not devices.monitored:
        return NoMonitor(), devices
    try:
        from greentrain.monitor import Monitor

        if devices is None:
            from greentrain.device import discover

            devices = discover()
        monitor = Monitor(list(devices.gpus), list(devices.cpus), event_log=event_log, wall_clock=clock,
                          event_interval_s=SAMPLE_EVENT_INTERVAL_S)
        monitor.start()
    except ConfigError:
        raise
    except Exception as e:  # measurement is optional; training is not
        log.warning("greentrain: energy monitor unavailable (%s: %s); steps are not measured", type(e).__name__, e)
        return NoMonitor(), devices
    return monitor, devices


def start_metrics(**kwargs: object) -> MetricsServer:
    """Start ``greentrain.exporters.MetricsServer(**kwargs)`` (imported only when metrics are asked for)."""
    try:
        from greentrain.exporters import MetricsServer
    except ImportError as e:
        raise ConfigError(f"--metrics-port: the exporter is not available ({e})") from None
    server = MetricsServer(**kwargs)  # type: ignore[arg-type]
    server.start()
    return server


def close_all(closers: Iterable[Callable[[], object]], *, raise_errors: bool = True) -> None:
    """Call every closer even if some fail; log each failure, then re-raise the first if asked."""
    errors: list[BaseException] = []
    for close in closers:
        try:
            close()
        except Exception as e:  # close everything even if one part fails
            errors.append(e)
    for error in errors:
        log.warning("greentrain: closing the session: %s: %s", type(error).__name__, error)
    if errors and raise_errors:
        raise errors[0]
