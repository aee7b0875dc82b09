"""Node-wide policy of the daemon: cap every GPU's power while the grid is dirty.

``dirty_grid_cap`` is the pure rule (intensity in, cap out). ``NodePolicyRunner``
reads the intensity on an APScheduler interval and hands the cap to the
server. A failing carbon signal keeps the last decision and shows its age in
``status`` (``node_policy.age_s``, ``last_error``) — it never lifts or sets a
cap on guesswork.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from datetime import datetime

from apscheduler.schedulers.background import BackgroundScheduler

from greentrain.clock import Clock, SystemClock
from greentrain.daemon.config import NodePolicyConfig
from greentrain.errors import ConfigError, GreentrainError, SignalError
from greentrain.signals.base import IntensityPoint

__all__ = ["dirty_grid_cap", "trace_intensity_fn", "provider_intensity_fn", "build_intensity_fn", "NodePolicyRunner"]

log = logging.getLogger(__name__)


def dirty_grid_cap(intensity_g_per_kwh: float, config: NodePolicyConfig) -> float | None:
    """The power cap (W) to apply at this intensity, or None when the grid is clean enough."""
    return config.dirty_power_limit_w if intensity_g_per_kwh > config.dirty_above_g_per_kwh else None


def trace_intensity_fn(points: list[IntensityPoint], clock: Clock) -> Callable[[], float]:
    """Intensity now from a loaded CSV trace; SignalError outside the trace's span."""
    starts = [p.start for p in points]

    def now_intensity() -> float:
        now = clock.now()
        i = bisect.bisect_right(starts, now) - 1
        if i < 0 or now >= points[i].end:
            raise SignalError(f"trace covers {starts[0].isoformat()}..{points[-1].end.isoformat()}; now is outside it")
        return points[i].intensity_g_per_kwh

    return now_intensity


def provider_intensity_fn(config: NodePolicyConfig) -> Callable[[], float]:
    """Intensity now from a provider plugin named in the config."""
    from greentrain import plugins

    cls = plugins.load("providers", config.provider or "")
    try:
        provider = cls(**config.provider_options)
    except TypeError as e:
        raise ConfigError(f"node_policy.provider_options for {config.provider!r}: {e}") from None
    zone = config.zone or ""
    return lambda: provider.latest(zone).intensity_g_per_kwh


def build_intensity_fn(config: NodePolicyConfig, clock: Clock | None = None) -> Callable[[], float]:
    """The intensity source the config names."""
    if config.trace is not None:
        from greentrain.signals.trace import load_trace

        return trace_intensity_fn(load_trace(config.trace), clock or SystemClock())
    return provider_intensity_fn(config)


class NodePolicyRunner:
    """Re-evaluates the node cap every ``config.interval_s`` and applies it through ``apply_cap``."""

    def __init__(
        self,
        config: NodePolicyConfig,
        intensity_fn: Callable[[], float],
        apply_cap: Callable[[float | None, dict], None],
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self._intensity_fn = intensity_fn
        self._apply_cap = apply_cap
        self._clock = clock or SystemClock()
        self._last_ok: datetime | None = None
        self._current: float | None = None
        self._scheduler: BackgroundScheduler | None = None

    def tick(self) -> float | None:
        """One evaluation; returns the cap in force afterwards."""
        now = self._clock.now()
        try:
            intensity = float(self._intensity_fn())
        except (GreentrainError, OSError) as e:
            age_s = (now - self._last_ok).total_seconds() if self._last_ok else None
            log.warning("node policy: carbon signal unavailable (%s); keeping the current cap", e)
            self._apply_cap(self._current, {"stale": True, "age_s": age_s, "last_error": str(e)})
            return self._current
        self._last_ok = now
        self._current = dirty_grid_cap(intensity, self.config)
        self._apply_cap(self._current, {"stale": False, "age_s": 0.0, "intensity_g_per_kwh": intensity})
        return self._current

    def start(self) -> None:
        """Evaluate now, then on the interval in a background thread."""
        self.tick()
        self._scheduler = BackgroundScheduler(daemon=True)
        self._scheduler.add_job(self.tick, "interval", seconds=self.config.interval_s, max_instances=1, coalesce=True)
        self._scheduler.start()

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
