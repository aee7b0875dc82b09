"""What a ``SignalChain`` does with the forecast archive: record every forecast it fetches, plan on the blend.

Recording: each provider forecast under its fetch time, the actuals the
chain reads (latest values, history), and greentrain's own forecast at most
once an hour (provider ``greentrain``), so both sources' skill can be
measured from the file alone (``greentrain carbon skill``).

Blending: before serving a provider's forecast, the chain asks for the
weights the archive's record supports (``skill.blend_weights``: each source's
error at each hour ahead over the last four weeks, against the actuals that
arrived later) and, where the provider is weighed below 1, mixes in
greentrain's own forecast. The simulator's ``ArchiveForecaster`` uses the
same weights and the same mix. With no record yet, the provider is served as
issued. Nothing here raises: an unreadable archive means "as issued".
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import numpy as np

from greentrain.signals.archive.store import ForecastArchive
from greentrain.signals.archive.replay import SKILL_WINDOW_H, hourly_points
from greentrain.signals.base import IntensityPoint
from greentrain.signals.forecast.forecaster import floor_hour
from greentrain.signals.archive.issued import IssuedForecasts
from greentrain.signals.archive.recording import OWN_SOURCE, ArchiveRecorder, hourly_rows
from greentrain.signals.forecast.skill import actual_table, blend_weights, combine

__all__ = ["ChainArchive"]

log = logging.getLogger(__name__)

_HOUR = timedelta(hours=1)
_SKILL_H = 72


class ChainArchive:
    """Recording and skill-weighted blending for one chain (one zone)."""

    def __init__(self, recorder: ArchiveRecorder, zone: str, *, blend: bool = True, max_age_h: float = 6.0,
                 window_h: int = SKILL_WINDOW_H) -> None:
        self.recorder, self.zone, self.blend_enabled = recorder, zone, blend
        self.max_age_s = max_age_h * 3600.0
        self.window_h = window_h
        self._weights: dict[tuple[str, datetime], np.ndarray] = {}
        self._own_recorded_at: datetime | None = None

    def record_forecast(self, points: list[IntensityPoint], fetched_at: datetime, provider: str) -> None:
        """A provider forecast as fetched."""
        self.recorder.record_forecast(points, issued_at=fetched_at, provider=provider, zone=self.zone)

    def record_actuals(self, points: list[IntensityPoint]) -> None:
        """Measured values the chain read (latest, history)."""
        self.recorder.record_actuals(points)

    def wants_own(self, provider: str, now: datetime) -> bool:
        """Whether greentrain's own forecast is needed now: to blend, or for the hourly record of its skill."""
        if self._own_recorded_at is None or now - self._own_recorded_at >= _HOUR:
            return True
        return self.blend_enabled and bool((self.weights(provider, now) < 1.0).any())

    def record_own(self, points: list[IntensityPoint], now: datetime) -> None:
        """greentrain's own forecast, at most once an hour."""
        if points and (self._own_recorded_at is None or now - self._own_recorded_at >= _HOUR):
            self.recorder.record_forecast(points, issued_at=now, provider=OWN_SOURCE, zone=self.zone)
            self._own_recorded_at = now

    def weights(self, provider: str, now: datetime) -> np.ndarray:
        """The provider's weight per hour ahead (``_SKILL_H`` of them) from the archive; 1 where unknown."""
        hour = floor_hour(now)
        key = (provider, hour)
        if key not in self._weights:
            self._weights = {k: v for k, v in self._weights.items() if k[1] == hour}  # one hour's worth
            try:
                weight = self.recorder.read(lambda archive: self._measure(archive, provider, hour))
            except Exception as e:  # noqa: BLE001 - a skill that cannot be read means "trust as issued"
                log.info("forecast skill unavailable (%s: %s); provider forecast used as issued", type(e).__name__, e)
                weight = None
            self._weights[key] = np.ones(_SKILL_H) if weight is None else weight
        return self._weights[key]

    def _measure(self, archive: ForecastArchive, provider: str, hour: datetime) -> np.ndarray:
        first = hour - self.window_h * _HOUR
        since_s = int((first - timedelta(seconds=self.max_age_s)).timestamp())
        now_s = int(hour.timestamp())
        sources = [IssuedForecasts(*archive.forecast_rows(name, self.zone, issued_from_s=since_s, issued_to_s=now_s),
                                   provider=name, zone=self.zone) for name in (provider, OWN_SOURCE)]
        origins_s = np.arange(int(first.timestamp()), now_s, 3600, dtype=np.int64)
        tables = [s.table(origins_s, _SKILL_H, max_age_s=self.max_age_s) for s in sources]
        target_s, value = archive.actual_rows(provider, self.zone)
        hourly = np.full(self.window_h + _SKILL_H + 1, np.nan)
        index = (target_s - int(first.timestamp())) // 3600
        inside = (index >= 0) & (index < hourly.size) & (target_s <= now_s)
        hourly[index[inside]] = value[inside]
        return blend_weights(tables[0], tables[1], actual_table(hourly, int(first.timestamp()), origins_s, _SKILL_H))

    def blend(self, provider_points: list[IntensityPoint], own_points: list[IntensityPoint], provider: str,
              now: datetime) -> list[IntensityPoint]:
        """The provider's points, with every whole hour it forecasts blended with greentrain's own where the
        archive weighs the provider below 1 (its current hour is kept as fetched). Same span as the input."""
        if not self.blend_enabled or not own_points or not provider_points:
            return provider_points
        next_hour = floor_hour(now) + _HOUR
        by_hour = dict(hourly_rows(provider_points, not_before=next_hour, whole_hours=False))
        if not by_hour:
            return provider_points
        span_h = (max(by_hour) - int(next_hour.timestamp())) // 3600 + 1
        hours = [next_hour + i * _HOUR for i in range(span_h)]
        own_by_hour = {p.start: p.intensity_g_per_kwh for p in own_points}
        p_values = np.array([by_hour.get(int(h.timestamp()), np.nan) for h in hours])
        o_values = np.array([own_by_hour.get(h, np.nan) for h in hours])
        weight = np.ones(span_h)
        measured = self.weights(provider, now)[:span_h]
        weight[: measured.size] = measured
        weight = np.where(np.isnan(o_values), 1.0, weight)
        if (weight[~np.isnan(p_values)] >= 1.0).all():
            return provider_points  # trusted as issued: keep its own resolution
        values = combine(p_values, o_values, weight)
        known = ~np.isnan(values)
        usable = span_h if known.all() else int(np.argmin(known))
        labels = [OWN_SOURCE if np.isnan(p) else provider if w >= 1.0 else f"{provider}+{OWN_SOURCE}"
                  for p, w in zip(p_values[:usable], weight[:usable])]
        head = [p for p in provider_points if p.start < next_hour]
        return head + hourly_points(values[:usable], next_hour, provider_points[0], labels)

    def close(self) -> None:
        self.recorder.close()
