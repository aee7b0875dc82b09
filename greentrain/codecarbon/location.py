"""CodeCarbon's location columns and grid zones, both ways.

CodeCarbon records a country as an ISO 3166 alpha-3 code (``GBR``) and, for
the USA and Canada, a lower-case state or province (``california``).
Electricity Maps zones are alpha-2 codes with optional sub-zones (``GB``,
``US-CAL-CISO``). A US state maps to the first balancing authority the static
table prices by that state (``california`` -> ``US-CAL-CISO``); elsewhere the
country is the zone.
"""

from __future__ import annotations

import pycountry  # a dependency of codecarbon

__all__ = ["Location", "zone_for", "location_for"]

Location = tuple[str, str, str]
"""(country_name, country_iso_code, region) as CodeCarbon writes them."""


def _country(code: str, name: str):
    code = code.strip()
    try:
        if len(code) == 3:
            return pycountry.countries.get(alpha_3=code.upper())
        if len(code) == 2:
            return pycountry.countries.get(alpha_2=code.upper())
        return pycountry.countries.lookup(name.strip()) if name.strip() else None
    except LookupError:
        return None


def zone_for(country_iso_code: str, region: str = "", country_name: str = "") -> str | None:
    """The grid zone of a CodeCarbon row's location, or None when it names no known country."""
    record = _country(country_iso_code, country_name)
    if record is None:
        return None
    state = region.strip().lower()
    if record.alpha_2 == "US" and state:
        from greentrain.signals.providers.static import us_zone_states  # its providers load httpx: only when needed

        for zone, zone_state in us_zone_states().items():
            if zone_state == state:
                return zone
    return record.alpha_2


def location_for(zone: str | None) -> Location:
    """CodeCarbon's (country_name, country_iso_code, region) for ``zone``; blanks when unknown."""
    if not zone:
        return "", "", ""
    key = zone.strip().upper()
    record = _country(key.partition("-")[0], "")
    if record is None:
        return "", "", ""
    if record.alpha_2 != "US":
        return record.name, record.alpha_3, ""
    from greentrain.signals.providers.static import us_zone_states

    return record.name, record.alpha_3, us_zone_states().get(key, "")
