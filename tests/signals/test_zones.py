"""Zone names: checked against the static table, with "did you mean"; other providers' regions pass."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.signals.providers.zones import check_zone, require_zone
from greentrain.job.resources import build_signals


@pytest.mark.parametrize("zone", ["GB", "DE", "DE-LU", "FR", "US-CAL-CISO", "SE-SE3", "NO-NO1", "IT-NO", "gb"])
def test_known_zones_pass(zone: str) -> None:
    assert check_zone(zone) is None
    assert check_zone(zone, "static") is None


@pytest.mark.parametrize(("zone", "suggestion"), [
    ("GBR", "did you mean 'GB' (United Kingdom)?"),
    ("DEU", "did you mean 'DE' (Germany)?"),
    ("Germany", "did you mean 'DE' (Germany)?"),
    ("Grmany", "did you mean 'DE' (Germany)"),
    ("US-CAL-CISX", "did you mean 'US-CAL-CISO'"),
    ("Atlantis", "unknown zone 'Atlantis'"),
    ("XX", "unknown zone 'XX'"),
])
def test_wrong_zones_are_refused_with_a_suggestion(zone: str, suggestion: str) -> None:
    reason = check_zone(zone)
    assert reason is not None and suggestion in reason


def test_other_providers_regions_are_not_checked() -> None:
    assert check_zone("CAISO_NORTH", "watttime") is None
    assert check_zone("postcode:BS16") is None
    assert check_zone("region:11", "ukgrid") is None
    assert check_zone("US-SW-WALC", "electricitymaps") is None  # the live provider knows more US zones
    assert check_zone("US-SW-WALC") is not None  # the static fallback of the default chain cannot price it


def test_require_zone_names_the_source_and_build_signals_refuses() -> None:
    with pytest.raises(ConfigError, match=r"^--zone: 'GBR' is not an Electricity Maps zone id"):
        require_zone("GBR", None, "--zone")
    with pytest.raises(ConfigError, match=r"^zone: unknown zone 'Atlantis'"):
        build_signals("Atlantis", None, clock=None)
