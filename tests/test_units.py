"""greentrain.units: every printed figure scales to a readable unit, and unknown is never 0."""

from __future__ import annotations

import math

import pytest

from greentrain.units import format_duration_s, format_energy_j, format_mass_g, format_time


@pytest.mark.parametrize(("grams", "text"), [
    (0.02, "20.0 mgCO2eq"), (0.00004, "0.0400 mgCO2eq"), (12.345, "12.3 gCO2eq"), (1234.0, "1.23 kgCO2eq"),
    (2.5e6, "2.50 tCO2eq"), (-0.0004, "-0.400 mgCO2eq"), (0.0, "0 gCO2eq"),
    (0.99999, "1.00 gCO2eq"),  # rounds up into the next unit rather than '1,000 mg'
    (None, "unknown"), (math.nan, "unknown"),
])
def test_mass_scales(grams: float | None, text: str) -> None:
    assert format_mass_g(grams) == text


@pytest.mark.parametrize(("joules", "text"), [
    (5.0, "5.00 J (0.00139 Wh)"), (1234.0, "1.23 kJ (0.343 Wh)"), (3.6e6, "3.60 MJ (1.00 kWh)"),
    (1e10, "10.0 GJ (2.78 MWh)"), (None, "unknown"),
])
def test_energy_scales_in_joules_and_watt_hours(joules: float | None, text: str) -> None:
    assert format_energy_j(joules) == text


def test_durations_and_times() -> None:
    from datetime import UTC, datetime

    assert [format_duration_s(s) for s in (0.512, 5, 42, 700, 7200, 3 * 86400)] == [
        "0.51 s", "5 s", "42 s", "12 min", "2.0 h", "3.0 d"]
    when = datetime(2022, 3, 14, 6, tzinfo=UTC)
    assert format_time(when) == "2022-03-14 06:00 UTC"
    assert format_time(when, simulated=True) == "2022-03-14 06:00 UTC (simulated)"
