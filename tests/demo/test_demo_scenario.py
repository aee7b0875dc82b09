"""The demo's default day is what the simulator says it is, and scenario input is validated."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from greentrain.demo.scenario import (
    DEFAULT_DEADLINE_H,
    DEFAULT_STARTS,
    Scenario,
    default_scenario,
    find_scenarios,
    shipped_trace,
)
from greentrain.errors import ConfigError


@pytest.mark.timeout(60)
@pytest.mark.parametrize("zone", ["GB", "US-CAL-CISO"])
def test_default_day_delays_pauses_and_meets_the_deadline_in_the_simulator(zone: str) -> None:
    start = DEFAULT_STARTS[zone]
    found = find_scenarios(shipped_trace(zone), deadline_h=DEFAULT_DEADLINE_H[zone], between=(start, start))
    assert [c.start for c in found] == [start], "the documented search no longer picks this day"
    (candidate,) = found
    assert candidate.saving > 0.05
    assert candidate.schedule[0][0] > start and len(candidate.schedule) >= 2


def test_shipped_traces_and_defaults() -> None:
    scenario = default_scenario("GB")
    assert scenario.trace.is_file() and scenario.trace.name == "GB_2022_hourly.csv"
    assert scenario.deadline == datetime(2022, 3, 15, tzinfo=UTC)
    assert default_scenario("US-CAL-CISO").trace.name == "US-CAL-CISO_2022_hourly.csv"
    with pytest.raises(ConfigError, match="--zone: no shipped trace for 'FR'"):
        shipped_trace("FR")


@pytest.mark.parametrize(("changes", "field"), [({"speedup": 0}, "speedup"), ({"work_h": -1}, "work_h"),
                                                ({"deadline_h": 4.0}, "deadline"),
                                                ({"start": datetime(2022, 3, 14)}, "start")])
def test_scenario_validation_names_the_field(changes: dict, field: str) -> None:
    args = {"zone": "GB", "trace": shipped_trace("GB"), "start": DEFAULT_STARTS["GB"], **changes}
    with pytest.raises(ConfigError, match=field):
        Scenario(**args)
