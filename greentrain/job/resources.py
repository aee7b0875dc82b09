"""Build the collaborators a Session or ``greentrain run`` needs from user-level arguments.

Each builder imports its package lazily (monitor, signals, exporters are
written as separate packages) and turns a missing or failing piece into a
clear ``ConfigError`` (bad input) or a logged degradation (measurement is
optional: training goes on without it).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any

from greentrain.clock import Clock
from greentrain.errors import ConfigError
from greentrain.signals.base import CarbonIntensityProvider

__all__ = ["build_signals", "build_monitor", "open_session_resources", "start_metrics"]

log = logging.getLogger("greentrain.session")


def build_signals(zone: str | None, provider: Any, clock: Clock) -> Any:
    """A SignalChain-like object (``latest()``, ``forecast(horizon_h=)``, ``status()``), or None for no signal."""
    if provider is None and zone is None:
        return None
    if zone is not None and (provider is None or isinstance(provider, str)):
        from greentrain.signals.zones import require_zone

        require_zone(zone, provider, "zone")
    if provider is not None and not isinstance(provider, (str, CarbonIntensityProvider)):
        if not callable(getattr(provider, "latest", None)):
            raise ConfigError(f"provider: {type(provider).__name__} has no latest(); pass a spec or a SignalChain")
        return provider  # already a chain
    try:
        from greentrain.signals import make_provider
        from greentrain.signals.chain import SignalChain
    except ImportError as e:
        raise ConfigError(f"provider: the signals package is not available ({e})") from None
    if isinstance(provider, CarbonIntensityProvider):
        providers = [provider]
    elif provider is not None:
        providers = [_make(make_provider, provider, clock)]
    else:
        providers = _default_providers(make_provider, clock)
    return SignalChain(providers, zone=zone or _zone_of(providers[0]), clock=clock)


def _make(make_provider: Any, spec: str, clock: Clock) -> Any:
    # A CSV trace is read at the clock's own time (a ReplayClock inside the trace's year replays it
    # as is; wall time maps to the same date in that year), so trace and job clock never drift apart.
    return make_provider(spec, clock=clock)


def _default_providers(make_provider: Any, clock: Clock) -> list[Any]:
    providers: list[Any] = []
    live = make_provider("electricitymaps", clock=clock)
    if live.configured():
        providers.append(live)
    providers.append(make_provider("static", clock=clock))
    return providers


def _zone_of(provider: Any) -> str:
    return str(getattr(provider, "zone", "") or "")


def build_monitor(devices: Any, event_log: Any, clock: Clock | None = None) -> tuple[Any, Any]:
    """Start a Monitor over ``devices`` (default: discovered); ``devices=False`` disables measurement.

    ``clock`` stamps the monitor's JSONL samples with the job's time (a replayed calendar included).
    """
    if devices is False:
        return None, None
    try:
        from greentrain.monitor import Monitor

        if devices is None:
            from greentrain.device import discover

            devices = discover()
        monitor = Monitor(list(getattr(devices, "gpus", [])), list(getattr(devices, "cpus", [])),
                          event_log=event_log, wall_clock=clock)
        monitor.start()
    except ConfigError:
        raise
    except Exception as e:  # measurement is optional; training is not
        log.warning("greentrain: energy monitor unavailable (%s: %s); steps are not measured", type(e).__name__, e)
        return None, devices
    return monitor, devices


def start_metrics(**kwargs: Any) -> Any:
    """Start ``greentrain.exporters.MetricsServer(**kwargs)`` (imported only when metrics are asked for)."""
    try:
        from greentrain.exporters import MetricsServer
    except ImportError as e:
        raise ConfigError(f"--metrics-port: the exporter is not available ({e})") from None
    server = MetricsServer(**kwargs)
    server.start()
    return server


def open_session_resources(session: Any, broadcast: Any) -> tuple[Any, Any, Any]:
    """A Session's event log, monitor, carbon signal (rank 0) and metrics endpoint, each closed at its exit."""
    from greentrain.events import EventLog

    args = session._args
    event_log = EventLog(args["jsonl"]) if args["jsonl"] else None
    if event_log is not None:
        session._closers.append(event_log.close)
    monitor = args["monitor"]
    if monitor is None:
        monitor, session._devices = build_monitor(args["devices"], event_log, session.clock)
        if monitor is not None:
            session._closers.insert(0, monitor.stop)
    signals = build_signals(args["zone"], args["provider"], session.clock) if broadcast.is_leader else None
    if isinstance(args["provider"], str | None) and callable(getattr(signals, "close", None)):
        session._closers.append(signals.close)  # built here from a spec: ours to close
    if args["metrics_port"] is not None:
        extra: dict[str, Any] = {}
        if broadcast.world_size > 1:  # one endpoint per node aggregating its ranks
            extra["multiprocess_dir"] = Path(tempfile.gettempdir()) / f"greentrain-metrics-{session.job}"
        session.metrics = start_metrics(job=session.job, monitor=monitor, signals=signals,
                                        job_stats=session.job_stats, addr=args["metrics_addr"],
                                        port=args["metrics_port"], clock=session.clock,
                                        allow_public=args["metrics_allow_public"], **extra)
        session._closers.insert(0, session.metrics.stop)
    return event_log, monitor, signals


def close_all(closers: Iterable[Callable[[], Any]], *, raise_errors: bool = True) -> None:
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
