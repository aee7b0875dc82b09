"""Check a grid zone name before a job starts, with a "did you mean" when it is wrong.

Electricity Maps zone ids are an ISO 3166 alpha-2 country code, optionally
followed by ``-`` and a sub-zone (``GB``, ``DE-LU``, ``SE-SE3``,
``US-CAL-CISO``). Without the provider's own list at hand (it needs a network
round trip and an API key), a zone is checked against the static table the
fallback provider uses: the ISO country codes, the US balancing authorities
and the Nordic bidding zones it maps. A three-letter code (``GBR``) or a
country name (``Germany``) is refused with the id to use instead. A US
sub-zone the static table lacks passes only with ``electricitymaps`` named as
the provider (the static fallback could not price it).

Providers with their own region names (WattTime ``CAISO_NORTH``, the UK grid's
regions, CSV traces, plugins) are not checked here.
"""

from __future__ import annotations

import difflib
from functools import cache

import pycountry  # a dependency of codecarbon

from greentrain.errors import ConfigError

__all__ = ["check_zone", "require_zone", "known_zones", "ZONE_CHECKED_PROVIDERS", "ALIASES"]

ALIASES = {"UK": "GB", "GREAT BRITAIN": "GB", "BRITAIN": "GB", "ENGLAND": "GB", "SCOTLAND": "GB", "WALES": "GB",
           "EL": "GR", "CAISO": "US-CAL-CISO", "CALIFORNIA": "US-CAL-CISO", "ERCOT": "US-TEX-ERCO",
           "TEXAS": "US-TEX-ERCO", "PJM": "US-MIDA-PJM", "MISO": "US-MIDW-MISO", "NYISO": "US-NY-NYIS",
           "ISONE": "US-NE-ISNE", "ISO-NE": "US-NE-ISNE"}
"""Names people use for a grid that are not its Electricity Maps id (UK is GB in ISO 3166)."""

ZONE_CHECKED_PROVIDERS = frozenset({"electricitymaps", "static"})
"""Providers whose zones are Electricity Maps ids (None, the default chain, is one of them too)."""


@cache
def known_zones() -> dict[str, str]:
    """Zone id -> a human name, for every zone the static table maps."""
    from greentrain.signals.providers.static import _US_ZONES, _data

    zones = {c.alpha_2: c.name for c in pycountry.countries}
    zones.update({zone: f"US, {state.title()}" for zone, state in _US_ZONES.items()})
    try:
        nordic = _data()["nordic"]
    except Exception:  # codecarbon's data missing: the country table is still a sound check
        nordic = {}
    for sub in nordic:
        if len(sub) > 2 and sub[:2] in zones:
            zones[f"{sub[:2]}-{sub}"] = f"{zones[sub[:2]]}, bidding zone {sub}"
    return zones


def _provider_name(provider: str | None) -> str | None:
    return None if provider is None else provider.partition(":")[0].strip().lower()


def check_zone(zone: str, provider: str | None = None) -> str | None:
    """None if ``zone`` is a usable zone for ``provider``, else the reason (with a suggestion).

    Callers add the flag or key the zone came from: ``f"--zone: {reason}"``.
    """
    if _provider_name(provider) not in ZONE_CHECKED_PROVIDERS | {None} or ":" in zone:
        return None  # another provider's region names, or a UK grid postcode:/region: form
    text = zone.strip()
    zones = known_zones()
    upper = text.upper()
    if upper in zones:
        return None
    country, dash, sub = upper.partition("-")
    if dash and sub and country in zones and all(part.isalnum() for part in sub.split("-")):
        if country == "US" and _provider_name(provider) != "electricitymaps":  # static maps only these
            return _unknown(zone, [z for z in zones if z.startswith("US-")], "US zone")
        return None  # a sub-zone the static table maps to its country
    alias = ALIASES.get(upper)
    if alias is not None and alias in zones:
        return f"{zone!r} is not an Electricity Maps zone id; did you mean {alias!r} ({zones[alias]})?"
    record = _country_record(text)
    if record is not None:
        return f"{zone!r} is not an Electricity Maps zone id; did you mean {record.alpha_2!r} ({record.name})?"
    return _unknown(zone, list(zones), "zone")


def _country_record(text: str):
    """The country a three-letter code or an English name names, if any."""
    try:
        if len(text) == 3 and text.isalpha():
            return pycountry.countries.get(alpha_3=text.upper())
        return pycountry.countries.lookup(text) if len(text) > 3 else None
    except LookupError:
        return None


def _unknown(zone: str, choices: list[str], what: str) -> str:
    zones = known_zones()
    by_name = {name.upper(): z for z, name in zones.items() if z in choices}
    close = difflib.get_close_matches(zone.upper(), choices, n=3, cutoff=0.6)
    close += [by_name[m] for m in difflib.get_close_matches(zone.upper(), list(by_name), n=2, cutoff=0.7)]
    hint = ", ".join(dict.fromkeys(f"{z!r} ({zones[z]})" for z in close))
    suggestion = f"; did you mean {hint}?" if hint else ""
    return (f"unknown {what} {zone!r}{suggestion} (zone ids: GB, DE-LU, FR, US-CAL-CISO, SE-SE3; "
            "list: https://app.electricitymaps.com/map)")


def require_zone(zone: str | None, provider: str | None, source: str) -> None:
    """Raise ConfigError naming ``source`` (a flag or ``file: key``) when ``zone`` is not usable."""
    if zone is None:
        return
    reason = check_zone(zone, provider)
    if reason is not None:
        raise ConfigError(f"{source}: {reason}")
