"""The demo folder's state survives a round trip and a damaged file is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.demo.state import (
    STATE_FILE,
    DemoState,
    load_demo_state,
    save_demo_state,
)
from greentrain.errors import ConfigError


def _state() -> DemoState:
    return DemoState(zone="GB", trace="t.csv", start="2022-03-14T00:00:00+00:00",
                     deadline="2022-03-15T00:00:00+00:00", work_h=8.0, speedup=480.0, policy="carbon-aware",
                     steps_total=120, step_time_real_s=0.1, sim_now="2022-03-14T05:30:00+00:00", runs=1)


def test_round_trip_and_new_folder(tmp_path: Path) -> None:
    assert load_demo_state(tmp_path) is None
    save_demo_state(tmp_path, _state())
    loaded = load_demo_state(tmp_path)
    assert loaded == _state()
    assert loaded.time("sim_now").hour == 5 and loaded.time("sim_now").tzinfo is not None
    assert not list(tmp_path.glob("*.tmp")), "the atomic write leaves no temporary file"


@pytest.mark.parametrize("text", ["{not json", '{"version": 1, "zone": "GB"}', '{"version": 99}',
                                  ('{"version": 1, "zone": "GB", "trace": "t", "start": "2022-03-14T00:00",'
                                   ' "deadline": "2022-03-15T00:00Z", "work_h": 8, "speedup": 1, "policy": "p",'
                                   ' "steps_total": 1, "step_time_real_s": 1, "sim_now": "2022-03-14T00:00Z"}')])
def test_damaged_state_names_the_file(tmp_path: Path, text: str) -> None:
    (tmp_path / STATE_FILE).write_text(text)
    with pytest.raises(ConfigError, match=str(tmp_path / STATE_FILE)):
        load_demo_state(tmp_path)
