"""Annual-average intensity from CodeCarbon's bundled data (no network, always available).

The last link of a fallback chain. Electricity Maps zone ids are mapped onto
CodeCarbon's keys: ``GB`` -> country GBR (via ISO 3166), ``DE-LU`` -> DEU,
``US-CAL-CISO`` -> the state of California (EPA eGRID), ``SE-SE3`` /
``NO-NO1`` -> the Nordic bidding-zone factors; other sub-zones fall back to
their country. Values are labelled ``static``: they carry no time-of-day signal.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache
from typing import Any, ClassVar

import pycountry  # a dependency of codecarbon

from greentrain.clock import Clock, SystemClock
from greentrain.errors import ConfigError, SignalError
from greentrain.signals.base import CarbonIntensityProvider, EmissionFactor, IntensityPoint, Kind
from greentrain.signals.forecast.forecaster import floor_hour
from greentrain.signals.providers.watttime import LBS_PER_MWH_TO_G_PER_KWH

__all__ = ["StaticProvider", "static_intensity", "us_zone_states"]

# Electricity Maps US balancing-authority zones -> the eGRID state that dominates each.
_US_ZONES = {
    "US-CAL-CISO": "california", "US-CAL-LDWP": "california", "US-CAL-BANC": "california",
    "US-CAL-IID": "california", "US-CAL-TIDC": "california", "US-NY-NYIS": "new york",
    "US-TEX-ERCO": "texas", "US-FLA-FPL": "florida", "US-FLA-FMPP": "florida", "US-FLA-TEC": "florida",
    "US-NE-ISNE": "massachusetts", "US-MIDA-PJM": "pennsylvania", "US-MIDW-MISO": "illinois",
    "US-NW-BPAT": "washington", "US-NW-PACW": "oregon", "US-NW-PSCO": "colorado", "US-NW-IPCO": "idaho",
    "US-NW-NEVP": "nevada", "US-SW-AZPS": "arizona", "US-SW-SRP": "arizona", "US-SW-PNM": "new mexico",
    "US-SE-SOCO": "georgia", "US-CAR-DUK": "north carolina", "US-CAR-SC": "south carolina",
    "US-CENT-SWPP": "kansas", "US-TEN-TVA": "tennessee", "US-HI-OA": "hawaii", "US-AK": "alaska",
}  # fmt: skip
_HINT = (
    "use an Electricity Maps zone id such as 'GB', 'DE-LU', 'FR', 'US-CAL-CISO' or 'SE-SE3' "
    "(list: https://app.electricitymaps.com/map or `curl https://api.electricitymaps.com/v3/zones`)"
)


def us_zone_states() -> dict[str, str]:
    """Electricity Maps US zone id -> the (lower-case) state whose eGRID average prices it."""
    return dict(_US_ZONES)


@cache
def _data() -> dict[str, Any]:
    from codecarbon.input import DataSource  # heavy import (pandas): only when needed

    source = DataSource()
    nordic = source.get_nordic_country_energy_mix_data().get("data", {})
    return {
        "global": source.get_global_energy_mix_data(),
        "usa": source.get_country_emissions_data("usa"),
        "nordic": nordic,
    }


def _country(code: str) -> tuple[float, str]:
    record = pycountry.countries.get(alpha_2=code) if len(code) == 2 else pycountry.countries.get(alpha_3=code)
    mix = _data()["global"].get(record.alpha_3 if record else "")
    if record is None or not mix or mix.get("carbon_intensity") is None:
        raise ConfigError(f"zone {code!r}: no CodeCarbon country average for it; {_HINT}")
    return float(mix["carbon_intensity"]), f"codecarbon global mix {record.alpha_3} ({mix.get('year')})"


def static_intensity(zone: str) -> tuple[float, str]:
    """(g/kWh, where it came from) for an Electricity Maps zone id; ConfigError if unknown."""
    key = zone.strip().upper()
    if not key or not all(part.isalnum() for part in key.split("-")):
        raise ConfigError(f"zone {zone!r}: not a zone id; {_HINT}")
    if key in _US_ZONES:
        state = _US_ZONES[key]
        lbs = _data()["usa"][state]["emissions"]
        return float(lbs) * LBS_PER_MWH_TO_G_PER_KWH, f"codecarbon EPA eGRID {state}"
    country, _, sub = key.partition("-")
    nordic = _data()["nordic"]
    if sub and sub in nordic and sub.startswith(country):
        return float(nordic[sub]["emission_factor"]), f"codecarbon nordic {sub} ({nordic[sub].get('year')})"
    if country == "US" and sub:
        raise ConfigError(f"zone {zone!r}: no static mapping for this US zone yet; use 'US' or a zone in {_HINT}")
    return _country(country)


def _factor(source: str) -> EmissionFactor:
    """eGRID output rates count combustion only; the world (OWID/Ember) and Nordic figures are lifecycle."""
    return EmissionFactor.DIRECT if "eGRID" in source else EmissionFactor.LIFECYCLE


class StaticProvider(CarbonIntensityProvider):
    """A constant annual average per zone, labelled ``static``; never fails for a known zone."""

    name: ClassVar[str] = "static"
    uses_network: ClassVar[bool] = False
    issues_forecasts: ClassVar[bool] = False

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()

    def latest(self, zone: str) -> IntensityPoint:
        try:
            value, _source = static_intensity(zone)
        except ConfigError as e:
            raise SignalError(str(e)) from None
        start = floor_hour(self._clock.now())
        return IntensityPoint(
            start=start,
            end=start + timedelta(hours=1),
            intensity_g_per_kwh=value,
            kind=Kind.STATIC,
            provider=self.name,
            zone=zone,
            emission_factor=_factor(_source),
            estimated=True,
        )

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        """No forecast: an annual average says nothing about which hour is cleaner."""
        return []

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        """No history: there are no actual values behind an average."""
        return []
