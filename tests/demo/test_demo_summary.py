"""The summary reads the engine's run log: totals, source labels, pauses, deadline."""

from __future__ import annotations

import json
from pathlib import Path

from greentrain.demo.state import DemoState
from greentrain.demo.summary import summary_json, rows, summarize_run


def _state(steps_total: int = 3) -> DemoState:
    return DemoState(zone="GB", trace="t.csv", start="2022-03-14T00:00:00+00:00",
                     deadline="2022-03-15T00:00:00+00:00", work_h=8.0, speedup=480.0, policy="carbon-aware",
                     steps_total=steps_total, step_time_real_s=0.1, sim_now="2022-03-14T00:00:00+00:00")


def _write(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + '{"t": "2022-03-14T2', encoding="utf-8")
    return path  # the last line is cut, as a hard kill leaves it


def _run(last_step_t: str, finished: bool = True) -> list[dict]:
    step = lambda n, t, e: {"t": t, "event": "step", "step": n, "duration_s": 600.0, "energy_j": 10.0,
                            "emissions_g": e, "tokens": 512, "loss": 5.0 - n}
    return [
        {"t": "2022-03-14T00:00:00Z", "event": "action", "action": "delay_start", "until": "2022-03-14T03:00:00Z"},
        {"t": "2022-03-14T00:00:00Z", "event": "state", "state": "waiting"},
        {"t": "2022-03-14T03:00:00Z", "event": "state", "state": "running"},
        {"t": "2022-03-14T03:05:00Z", "event": "sample", "device": "cpu-estimate", "source": "estimated",
         "power_w": 8.0, "energy_j": 1.0},
        {"t": "2022-03-14T03:05:00Z", "event": "sample", "device": "gpu0", "source": "measured", "failed": False,
         "power_w": 80.0, "energy_j": 1.0},
        step(1, "2022-03-14T03:10:00Z", 0.001),
        {"t": "2022-03-14T03:10:00Z", "event": "state", "state": "paused", "until": "2022-03-14T09:00:00Z"},
        {"t": "2022-03-14T04:00:00Z", "event": "state", "state": "paused", "until": "2022-03-14T10:00:00Z"},
        {"t": "2022-03-14T10:00:00Z", "event": "state", "state": "running"},
        step(2, "2022-03-14T10:10:00Z", 0.0005),
        step(3, last_step_t, 0.0005),
        {"t": last_step_t, "event": "summary", "steps": 3, "energy_j": 40.0, "emissions_g": 0.0025,
         "emissions_avoided_g": 0.0005, "finished": finished},
    ]


def test_summary_of_a_finished_run(tmp_path: Path) -> None:
    s = summarize_run(_write(tmp_path / "run.jsonl", _run("2022-03-14T10:20:00Z")), _state())
    assert s.step_indices == [1, 2, 3] and s.losses == [4.0, 3.0, 2.0]
    assert s.energy_sources == {"cpu-estimate": "estimated", "gpu0": "measured"}
    assert s.pauses == 1, "a re-plan during a pause is the same pause"
    assert s.waits == 1 and s.deadline_met
    assert abs(s.steps_emissions_g - 0.002) < 1e-12 and abs(s.run_now_g - 0.003) < 1e-12
    table = dict(rows(s))
    assert "gpu0: measured" in table["Energy"] and "cpu-estimate: estimated" in table["Energy"]
    assert "deadline met" in table["Finished vs deadline (simulated)"]
    # Net first (run-now 3 - emitted 2.5 = 0.5 mg), then its breakdown: timing 1.0 minus waiting 0.5.
    assert table["Avoided vs run-now (net)"] == "0.50 mgCO2eq (16.7 %) = timing the steps 1.00 mgCO2eq − idle while waiting 0.50 mgCO2eq"
    doc = summary_json(s)
    assert doc["emissions_avoided_net_g"] == 0.0005 and abs(doc["emissions_avoided_gross_g"] - 0.001) < 1e-12
    assert abs(doc["waiting_emissions_g"] - 0.0005) < 1e-12 and doc["deadline_met"] is True
    assert "idle while waiting 0.50 mgCO2eq" in table["Emissions"]


def test_summary_flags_a_missed_deadline_and_an_unfinished_job(tmp_path: Path) -> None:
    late = summarize_run(_write(tmp_path / "late.jsonl", _run("2022-03-15T01:00:00Z")), _state())
    assert not late.deadline_met and "DEADLINE MISSED" in dict(rows(late))["Finished vs deadline (simulated)"]
    partial = summarize_run(_write(tmp_path / "part.jsonl", _run("2022-03-14T10:20:00Z", finished=False)),
                            _state(steps_total=10))
    assert partial.finished_at is None
    assert dict(rows(partial))["Finished vs deadline (simulated)"] == "not finished (3/10 steps)"
