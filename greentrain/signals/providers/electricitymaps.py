"""Electricity Maps API v3 (api.electricitymaps.com): latest, history, past-range, forecast.

Auth is the ``auth-token`` header (``$ELECTRICITYMAPS_TOKEN`` or ``token_file``).
We always send ``disableCallerLookup=true`` so the API never guesses a
location from our IP address: the zone (or lat/lon) is always explicit.
Values are hourly; ``datetime`` is the interval start.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import ClassVar

import httpx

from greentrain.clock import Clock, SystemClock, ensure_aware_utc
from greentrain.errors import AuthError, ConfigError
from greentrain.signals.providers import validate as v
from greentrain.signals.base import CarbonIntensityProvider, EmissionFactor, IntensityPoint, Kind
from greentrain.signals.transport.credentials import read_secret
from greentrain.signals.transport.client import JSONClient, QueryValue
from greentrain.userfile import JSONValue

__all__ = ["ElectricityMapsProvider", "parse_point", "parse_series", "DEFAULT_API_BASE", "TOKEN_ENV"]

DEFAULT_API_BASE = "https://api.electricitymaps.com/v3"
TOKEN_ENV = "ELECTRICITYMAPS_TOKEN"
_HOUR = timedelta(hours=1)
_PAST_RANGE_MAX = timedelta(days=10)  # the API's limit for hourly past-range queries
_FACTORS = {"direct": EmissionFactor.DIRECT, "lifecycle": EmissionFactor.LIFECYCLE}


def parse_point(obj: JSONValue, zone: str | None, where: str, kind: Kind, default_factor: EmissionFactor) -> IntensityPoint:
    """One ``{carbonIntensity, datetime, ...}`` object as an hourly point; SignalError if malformed."""
    item = v.as_mapping(obj, where)
    start = v.timestamp(v.field(item, "datetime", where), f"{where}.datetime")
    value = v.intensity(v.field(item, "carbonIntensity", where), f"{where}.carbonIntensity")
    echoed = item.get("zone")
    if zone is not None:
        v.same_zone(echoed, zone, where)
    factor = _FACTORS.get(str(item.get("emissionFactorType", "")).lower(), default_factor)
    return IntensityPoint(
        start=start,
        end=start + _HOUR,
        intensity_g_per_kwh=value,
        kind=kind,
        provider=ElectricityMapsProvider.name,
        zone=str(echoed or zone or ""),
        emission_factor=factor,
        estimated=item.get("isEstimated") is True,
    )


def parse_series(
    body: JSONValue, zone: str | None, key: str, kind: Kind, default_factor: EmissionFactor
) -> list[IntensityPoint]:
    """The list under ``key`` ('history', 'data' or 'forecast') as time-ordered points.

    Null values inside a series are skipped (the API leaves gaps it has no data
    for); malformed items, out-of-order times or another zone raise SignalError.
    """
    where = f"electricitymaps {key}"
    obj = v.as_mapping(body, where)
    if zone is not None:
        v.same_zone(obj.get("zone"), zone, where)
    items = v.as_list(v.field(obj, key, where), f"{where}.{key}")
    points = []
    for i, item in enumerate(items):
        if isinstance(item, Mapping) and item.get("carbonIntensity", 0) is None:
            continue
        points.append(parse_point(item, zone, f"{where}[{i}]", kind, default_factor))
    return v.in_order(points, where)


class ElectricityMapsProvider(CarbonIntensityProvider):
    """Live carbon intensity from Electricity Maps (token needed)."""

    name: ClassVar[str] = "electricitymaps"

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        api_base: str | None = None,
        token_file: str | Path | None = None,
        emission_factor: str = "direct",
        lat: float | None = None,
        lon: float | None = None,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``emission_factor`` is 'direct' or 'lifecycle'; ``lat``/``lon`` replace the zone when both given."""
        if emission_factor not in _FACTORS:
            raise ConfigError(f"emission_factor: {emission_factor!r} is not one of {', '.join(_FACTORS)}")
        if (lat is None) != (lon is None):
            raise ConfigError("lat/lon: give both or neither")
        self._factor = _FACTORS[emission_factor]
        self._token = read_secret(TOKEN_ENV, token_file)
        self._location = None if lat is None or lon is None else {"lat": float(lat), "lon": float(lon)}
        self._clock = clock or SystemClock()
        self._http = JSONClient(self.name, api_base or DEFAULT_API_BASE, timeout_s=timeout_s, transport=transport)
        self._http.redactor.add(self._token)

    def configured(self) -> bool:
        return bool(self._token)

    def _get(self, path: str, zone: str, **params: QueryValue) -> JSONValue:
        if not self._token:
            raise AuthError(f"{self.name}: no API token; set ${TOKEN_ENV} or token_file in the config")
        query: dict[str, QueryValue] = {"disableCallerLookup": "true", "emissionFactorType": self._factor.value}
        if self._location:
            query.update(self._location)
        else:
            query["zone"] = zone
        query.update(params)
        return self._http.get(path, params=query, headers={"auth-token": self._token})

    def _zone_check(self, zone: str) -> str | None:
        # With lat/lon the API chooses the zone, so there is nothing to compare the echo with.
        return None if self._location else zone

    def latest(self, zone: str) -> IntensityPoint:
        with self._http.call("latest"):
            body = self._get("carbon-intensity/latest", zone)
            return parse_point(body, self._zone_check(zone), "electricitymaps latest", Kind.ACTUAL, self._factor)

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        with self._http.call("forecast"):
            body = self._get("carbon-intensity/forecast", zone)
            points = parse_series(body, self._zone_check(zone), "forecast", Kind.FORECAST, self._factor)
            now = self._clock.now()
            limit = now + timedelta(hours=horizon_h)
            return [p for p in points if p.end > now and p.start < limit]

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        start, end = ensure_aware_utc(start, "start"), ensure_aware_utc(end, "end")
        if start >= end:
            return []
        with self._http.call("history"):
            if start >= self._clock.now() - timedelta(hours=24):
                body = self._get("carbon-intensity/history", zone)
                points = parse_series(body, self._zone_check(zone), "history", Kind.ACTUAL, self._factor)
            else:
                points = self._past_range(zone, start, end)
            return [p for p in points if p.end > start and p.start < end]

    def _past_range(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        points: list[IntensityPoint] = []
        chunk_start = start
        while chunk_start < end:
            chunk_end = min(end, chunk_start + _PAST_RANGE_MAX)
            body = self._get(
                "carbon-intensity/past-range",
                zone,
                start=chunk_start.isoformat().replace("+00:00", "Z"),
                end=chunk_end.isoformat().replace("+00:00", "Z"),
            )
            chunk = parse_series(body, self._zone_check(zone), "data", Kind.ACTUAL, self._factor)
            points.extend(p for p in chunk if not points or p.start > points[-1].start)
            chunk_start = chunk_end
        return points

    def close(self) -> None:
        self._http.close()


