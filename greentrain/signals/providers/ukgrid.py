"""GB Carbon Intensity API (api.carbonintensity.org.uk, National Grid ESO; no key).

Zones: ``GB`` (national), ``postcode:<outward code>`` (e.g. ``postcode:BS16``)
or ``region:<id>`` (1-17). Values are half-hourly; each carries a forecast
and, nationally and once measured, an ``actual`` which we prefer. Regional
endpoints return ``data`` as a list of regions for "now" but as one region
object for time ranges; both shapes are accepted.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar

import httpx

from greentrain.clock import Clock, SystemClock, ensure_aware_utc
from greentrain.errors import ConfigError, SignalError
from greentrain.signals.providers import validate as v
from greentrain.signals.base import CarbonIntensityProvider, EmissionFactor, IntensityPoint, Kind
from greentrain.signals.transport.client import JSONClient
from greentrain.userfile import JSONValue

__all__ = ["UKGridProvider", "parse_periods", "zone_paths", "DEFAULT_API_BASE"]

DEFAULT_API_BASE = "https://api.carbonintensity.org.uk"
_MAX_RANGE = timedelta(days=13)  # the API serves at most 14 days per range query


def zone_paths(zone: str) -> tuple[str, str]:
    """(path prefix for 'now', suffix for ranges) of a zone; ConfigError listing valid forms."""
    kind, _, value = zone.partition(":")
    if zone.upper() == "GB":
        return "intensity", ""
    if kind == "postcode" and value.strip().isalnum() and 2 <= len(value.strip()) <= 4:
        code = value.strip().upper()
        return f"regional/postcode/{code}", f"/postcode/{code}"
    if kind == "region" and value.isdigit() and 1 <= int(value) <= 17:
        return f"regional/regionid/{int(value)}", f"/regionid/{int(value)}"
    raise ConfigError(
        f"zone {zone!r}: the ukgrid provider takes 'GB', 'postcode:<outward code>' (e.g. postcode:BS16) "
        "or 'region:<1-17>' (see api.carbonintensity.org.uk region list)"
    )


def _region_periods(data: JSONValue, zone: str, where: str) -> list[JSONValue]:
    """The half-hour list inside a regional body, whose ``data`` is a list or an object."""
    one = data
    if isinstance(data, list):
        if len(data) != 1:
            raise SignalError(f"{where}.data: expected one region, got {len(data)}")
        one = data[0]
    region = v.as_mapping(one, f"{where}.data")
    kind, _, value = zone.partition(":")
    echoed = region.get("postcode") if kind == "postcode" else region.get("regionid")
    if echoed is not None and str(echoed).upper() != value.strip().upper():
        raise SignalError(f"{where}: answered for {kind} {str(echoed)[:20]!r}, asked for {value!r}")
    return v.as_list(v.field(region, "data", where), f"{where}.data.data")


def parse_periods(body: JSONValue, zone: str, where: str = "ukgrid") -> list[IntensityPoint]:
    """A national or regional body as half-hourly points (actual when present, else forecast)."""
    data = v.field(body, "data", where)
    periods = v.as_list(data, f"{where}.data") if zone.upper() == "GB" else _region_periods(data, zone, where)
    points = []
    for i, item in enumerate(periods):
        at = f"{where}.data[{i}]"
        start = v.timestamp(v.field(item, "from", at), f"{at}.from")
        end = v.timestamp(v.field(item, "to", at), f"{at}.to")
        values = v.as_mapping(v.field(item, "intensity", at), f"{at}.intensity")
        actual = values.get("actual")
        key = "actual" if actual is not None else "forecast"
        points.append(
            IntensityPoint(
                start=start,
                end=end,
                intensity_g_per_kwh=v.intensity(values.get(key), f"{at}.intensity.{key}"),
                kind=Kind.ACTUAL if key == "actual" else Kind.FORECAST,
                provider=UKGridProvider.name,
                zone=zone,
                emission_factor=EmissionFactor.DIRECT,
                estimated=key == "forecast",
            )
        )
    return v.in_order(points, where)


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%MZ")


class UKGridProvider(CarbonIntensityProvider):
    """Great Britain's national and regional carbon intensity, half-hourly, with a 48 h forecast."""

    name: ClassVar[str] = "ukgrid"

    def __init__(
        self, *, clock: Clock | None = None, api_base: str | None = None, timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._http = JSONClient(self.name, api_base or DEFAULT_API_BASE, timeout_s=timeout_s, transport=transport)

    def latest(self, zone: str) -> IntensityPoint:
        now_path, _ = zone_paths(zone)
        with self._http.call("latest"):
            points = parse_periods(self._http.get(now_path), zone, "ukgrid latest")
            if not points:
                raise SignalError(f"ukgrid latest: no half-hour returned for {zone!r}")
            now = self._clock.now()
            current = [p for p in points if p.start <= now]
            return current[-1] if current else points[0]

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        _, suffix = zone_paths(zone)
        now = self._clock.now()
        prefix = "intensity" if not suffix else "regional/intensity"
        with self._http.call("forecast"):
            body = self._http.get(f"{prefix}/{_stamp(now)}/fw48h{suffix}")
            points = parse_periods(body, zone, "ukgrid forecast")
            limit = now + timedelta(hours=horizon_h)
            return [p for p in points if p.end > now and p.start < limit]

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        _, suffix = zone_paths(zone)
        start, end = ensure_aware_utc(start, "start"), ensure_aware_utc(end, "end")
        prefix = "intensity" if not suffix else "regional/intensity"
        points: list[IntensityPoint] = []
        chunk_start = start
        with self._http.call("history"):
            while chunk_start < end:
                chunk_end = min(end, chunk_start + _MAX_RANGE)
                body = self._http.get(f"{prefix}/{_stamp(chunk_start)}/{_stamp(chunk_end)}{suffix}")
                chunk = parse_periods(body, zone, "ukgrid history")
                points.extend(p for p in chunk if not points or p.start > points[-1].start)
                chunk_start = chunk_end
            return [p for p in points if p.end > start and p.start < end]

    def close(self) -> None:
        self._http.close()
