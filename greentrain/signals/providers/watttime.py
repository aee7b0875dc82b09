"""WattTime API v3 (api.watttime.org): marginal emissions (MOER) and the percentile index.

``/login`` trades HTTP basic credentials ($WATTTIME_USER, $WATTTIME_PASSWORD
or ``password_file``) for a bearer token valid 30 minutes; we renew it a few
minutes before expiry and once more whenever the API answers 401/403.
MOER comes in lbs CO2/MWh and is converted to g/kWh (x 0.45359237). The
``/v3/signal-index`` percentile (0-100) is not an emission rate: it is
returned as a ``SignalIndexPoint``, never as g/kWh.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import ClassVar

import httpx

from greentrain.clock import Clock, SystemClock, ensure_aware_utc
from greentrain.errors import AuthError, SignalError
from greentrain.signals.providers import validate as v
from greentrain.signals.base import CarbonIntensityProvider, EmissionFactor, IntensityPoint, Kind
from greentrain.signals.transport.credentials import read_secret
from greentrain.signals.transport.client import JSONClient, QueryParams, QueryValue
from greentrain.userfile import JSONValue

__all__ = [
    "WattTimeProvider",
    "SignalIndexPoint",
    "parse_data",
    "parse_forecast_history",
    "parse_signal_index",
    "LBS_PER_MWH_TO_G_PER_KWH",
    "DEFAULT_API_BASE",
]

DEFAULT_API_BASE = "https://api.watttime.org"
LBS_PER_MWH_TO_G_PER_KWH = 0.45359237
"""1 lb = 453.59237 g and 1 MWh = 1000 kWh."""
_UNITS = {"lbs_co2_per_mwh": LBS_PER_MWH_TO_G_PER_KWH, "kg_co2_per_mwh": 1.0, "g_co2_per_kwh": 1.0}
_TOKEN_LIFETIME = timedelta(minutes=30)
_RENEW_BEFORE = timedelta(minutes=5)


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalIndexPoint:
    """WattTime's relative signal: where now sits among the recent past, 0 (clean) to 100 (dirty)."""

    start: datetime
    end: datetime
    percentile: float
    region: str
    signal_type: str


def _meta(body: JSONValue, region: str, where: str) -> tuple[list[JSONValue], dict[str, JSONValue]]:
    obj = v.as_mapping(body, where)
    meta = dict(v.as_mapping(v.field(obj, "meta", where), f"{where}.meta"))
    v.same_zone(meta.get("region"), region, f"{where}.meta.region")
    return v.as_list(v.field(obj, "data", where), f"{where}.data"), meta


def _period(meta: dict[str, JSONValue], where: str) -> timedelta:
    seconds = meta.get("data_point_period_seconds", 300)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 1 <= seconds <= 86400:
        raise SignalError(f"{where}.meta.data_point_period_seconds: {seconds!r} is not a period in seconds")
    return timedelta(seconds=float(seconds))


def _parse_points(items: list[JSONValue], region: str, kind: Kind, scale: float, period: timedelta,
                  where: str) -> list[IntensityPoint]:
    points = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        obj = v.as_mapping(item, at)
        start = v.timestamp(v.field(obj, "point_time", at), f"{at}.point_time")
        points.append(
            IntensityPoint(
                start=start,
                end=start + period,
                intensity_g_per_kwh=v.intensity(v.field(obj, "value", at), f"{at}.value", scale),
                kind=kind,
                provider=WattTimeProvider.name,
                zone=region,
                emission_factor=EmissionFactor.DIRECT,
                estimated=obj.get("imputed_data_used") is True,
            )
        )
    return v.in_order(points, where)


def _scale(meta: dict[str, JSONValue], where: str) -> float:
    units = str(meta.get("units", "lbs_co2_per_mwh")).lower()
    if units not in _UNITS:
        raise SignalError(f"{where}.meta.units: {units[:40]!r} is not an emission rate ({', '.join(_UNITS)})")
    return _UNITS[units]


def parse_data(body: JSONValue, region: str, kind: Kind, where: str = "watttime") -> list[IntensityPoint]:
    """``/v3/forecast`` or ``/v3/historical`` body as g/kWh points; SignalError if malformed.

    Refuses units that are not an emission rate (e.g. 'percentile').
    """
    items, meta = _meta(body, region, where)
    return _parse_points(items, region, kind, _scale(meta, where), _period(meta, where), f"{where}.data")


def parse_forecast_history(body: JSONValue, region: str,
                           where: str = "watttime forecast/historical") -> list[tuple[datetime, list[IntensityPoint]]]:
    """``/v3/forecast/historical`` body: (generated_at, forecast points in g/kWh) per past forecast, in order."""
    items, meta = _meta(body, region, where)
    scale, period = _scale(meta, where), _period(meta, where)
    issued = []
    for i, item in enumerate(items):
        at = f"{where}.data[{i}]"
        generated_at = v.timestamp(v.field(item, "generated_at", at), f"{at}.generated_at")
        forecast = v.as_list(v.field(item, "forecast", at), f"{at}.forecast")
        issued.append((generated_at, _parse_points(forecast, region, Kind.FORECAST, scale, period, f"{at}.forecast")))
    if any(later[0] < earlier[0] for earlier, later in zip(issued, issued[1:])):
        raise SignalError(f"{where}.data: generated_at times out of order")
    return issued


def parse_signal_index(body: JSONValue, region: str, where: str = "watttime signal-index") -> SignalIndexPoint:
    """The latest ``/v3/signal-index`` value, kept as a percentile."""
    items, meta = _meta(body, region, where)
    if not items:
        raise SignalError(f"{where}.data: empty")
    if str(meta.get("units", "percentile")).lower() != "percentile":
        raise SignalError(f"{where}.meta.units: expected 'percentile', got {str(meta.get('units'))[:40]!r}")
    item = items[-1]
    start = v.timestamp(v.field(item, "point_time", where), f"{where}.point_time")
    value = v.field(item, "value", where)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise SignalError(f"{where}.value: {value!r} is not a percentile in [0, 100]")
    return SignalIndexPoint(
        start=start,
        end=start + _period(meta, where),
        percentile=float(value),
        region=region,
        signal_type=str(meta.get("signal_type", "co2_moer")),
    )


class WattTimeProvider(CarbonIntensityProvider):
    """Marginal operating emissions rate (MOER) from WattTime; zone = WattTime region (e.g. CAISO_NORTH)."""

    name: ClassVar[str] = "watttime"

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        api_base: str | None = None,
        user: str | None = None,
        password_file: str | Path | None = None,
        signal_type: str = "co2_moer",
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Credentials: ``user`` or $WATTTIME_USER; password from ``password_file`` or $WATTTIME_PASSWORD."""
        self._user = user or read_secret("WATTTIME_USER")
        self._password = read_secret("WATTTIME_PASSWORD", password_file)
        self._signal_type = signal_type
        self._clock = clock or SystemClock()
        self._http = JSONClient(self.name, api_base or DEFAULT_API_BASE, timeout_s=timeout_s, transport=transport)
        self._http.redactor.add(self._password, partners=[self._user or ""])
        self._token: str | None = None
        self._token_expires: datetime | None = None
        self._lock = threading.Lock()
        self.logins = 0
        """How many times we logged in (tests check renewal)."""

    def configured(self) -> bool:
        return bool(self._user and self._password)

    def _login(self) -> str:
        if not self.configured():
            raise AuthError(f"{self.name}: no credentials; set $WATTTIME_USER and $WATTTIME_PASSWORD")
        body = self._http.get("login", auth=httpx.BasicAuth(self._user or "", self._password or ""))
        token = v.field(body, "token", "watttime login")
        if not isinstance(token, str) or not token:
            raise SignalError("watttime login: no token in the answer")
        self._token, self._token_expires = token, self._clock.now() + _TOKEN_LIFETIME
        self._http.redactor.add(token)
        self.logins += 1
        return token

    def _bearer(self, renew: bool = False) -> str:
        with self._lock:
            expired = self._token_expires is None or self._clock.now() >= self._token_expires - _RENEW_BEFORE
            if renew or expired or self._token is None:
                return self._login()
            return self._token

    def _get(self, path: str, params: QueryParams) -> JSONValue:
        try:
            return self._http.get(path, params=params, headers={"Authorization": f"Bearer {self._bearer()}"})
        except AuthError:
            # The token may have been revoked early: log in again once, then give up.
            return self._http.get(path, params=params, headers={"Authorization": f"Bearer {self._bearer(True)}"})

    def latest(self, zone: str) -> IntensityPoint:
        now = self._clock.now()
        with self._http.call("latest"):
            points = self.history(zone, now - timedelta(hours=1), now)
            if not points:
                raise SignalError(f"{self.name} historical: no data for {zone!r} in the last hour")
            return points[-1]

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        params: dict[str, QueryValue] = {"region": zone, "signal_type": self._signal_type,
                                         "horizon_hours": int(min(max(horizon_h, 0), 72))}
        with self._http.call("forecast"):
            points = parse_data(self._get("v3/forecast", params), zone, Kind.FORECAST, "watttime forecast")
            limit = self._clock.now() + timedelta(hours=horizon_h)
            return [p for p in points if p.start < limit]

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        start, end = ensure_aware_utc(start, "start"), ensure_aware_utc(end, "end")
        params = {
            "region": zone,
            "signal_type": self._signal_type,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "include_imputed_marker": "true",
        }
        with self._http.call("history"):
            points = parse_data(self._get("v3/historical", params), zone, Kind.ACTUAL, "watttime historical")
            return [p for p in points if p.end > start and p.start < end]

    def forecast_history(self, zone: str, start: datetime, end: datetime,
                         horizon_h: float = 72.0) -> list[tuple[datetime, list[IntensityPoint]]]:
        """Past forecasts generated in [start, end] (``/v3/forecast/historical``; keep ranges to a day or
        less: one forecast every 5 minutes, each ``horizon_h`` hours long), as (generated_at, points)."""
        start, end = ensure_aware_utc(start, "start"), ensure_aware_utc(end, "end")
        params: dict[str, QueryValue] = {"region": zone, "signal_type": self._signal_type, "start": start.isoformat(),
                  "end": end.isoformat(), "horizon_hours": int(min(max(horizon_h, 0), 72))}
        with self._http.call("forecast-historical"):
            return parse_forecast_history(self._get("v3/forecast/historical", params), zone)

    def signal_index(self, zone: str) -> SignalIndexPoint:
        """The current percentile signal (free for every region); not in g/kWh."""
        with self._http.call("signal-index"):
            body = self._get("v3/signal-index", {"region": zone, "signal_type": self._signal_type})
            return parse_signal_index(body, zone)

    def close(self) -> None:
        self._http.close()
