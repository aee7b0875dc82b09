"""The HTML run report, from run logs written with the real EventLog over a real carbon trace."""

from __future__ import annotations

from collections.abc import Callable

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.events import EventLog
from greentrain.report import build_report, counterfactual_run_now, load_run
from greentrain.signals.trace import load_trace
from greentrain.testing import FakeGPU
from greentrain.units import format_energy_j, format_mass_g

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2022, 1, 10, tzinfo=UTC)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _write_paused_run(path: Path, trace_csv: Path) -> dict[str, float]:
    """Run 2 h, pause 3 h, run 2 h on the GB trace; an A40 on ResNet-50 draws the profile's power."""
    points = {p.start: p.intensity_g_per_kwh for p in load_trace(trace_csv)}
    gpu = FakeGPU("a40")
    power_w = gpu.base_power_w()
    step_s, totals = 300.0, {"energy_j": 0.0, "emissions_g": 0.0}
    with EventLog(path) as log:
        for hour in range(8):
            log.write("carbon", T0 + timedelta(hours=hour), intensity_g_per_kwh=points[T0 + timedelta(hours=hour)],
                      kind="actual", provider="csv", zone="GB")
        log.write("forecast", T0, points=[[T0 + timedelta(hours=h), points[T0 + timedelta(hours=h)] * 1.05]
                                          for h in range(8)])
        log.write("state", T0, state="running")
        t = T0
        for step in range(48):
            if step == 24:
                log.write("action", t, action="pause", reason="dirty grid <b>now</b>", until=t + timedelta(hours=3),
                          power_limit_w=None, precision=None, applied=["set_power_limit"])
                log.write("note", t, message="signal electricitymaps failed (AuthError); using the csv fallback")
                log.write("state", t, state="paused", until=t + timedelta(hours=2))
                log.write("state", t + timedelta(hours=1), state="paused", until=t + timedelta(hours=3))  # re-plan
                t += timedelta(hours=3)
                log.write("state", t, state="running")
            t += timedelta(seconds=step_s)
            mid = (t - timedelta(seconds=step_s / 2)).replace(minute=0, second=0)
            energy_j = power_w * step_s
            emissions_g = energy_j / 3.6e6 * points[mid]
            totals["energy_j"] += energy_j
            totals["emissions_g"] += emissions_g
            log.write("sample", t, device="gpu0", kind="gpu", power_w=power_w, energy_j=totals["energy_j"],
                      source="measured")
            log.write("step", t, step=step, duration_s=step_s, energy_j=energy_j, emissions_g=emissions_g)
        log.write("summary", t, energy_j=totals["energy_j"], emissions_g=totals["emissions_g"],
                  emissions_avoided_g=1.25)
    return totals


def test_report_has_every_plot_and_the_totals(tmp_path: Path, carbon_trace: Callable[[str], Path]) -> None:
    log = tmp_path / "run.jsonl"
    totals = _write_paused_run(log, carbon_trace("GB_2022_hourly.csv"))
    index = build_report(log, tmp_path / "out")
    html = index.read_text()
    for name in ("power.png", "intensity.png", "state.png", "emissions.png"):
        png = (tmp_path / "out" / name).read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > 5_000, name
        assert f'src="{name}"' in html
    assert format_energy_j(totals["energy_j"]) in html
    assert format_mass_g(totals["emissions_g"]) in html
    assert "1.25 gCO2eq" in html  # the engine's avoided figure
    assert "dirty grid &lt;b&gt;now&lt;/b&gt;" in html and "<b>now" not in html
    assert "<td>1</td>" in html  # one pause
    assert "<td>None</td>" not in html and "<td>set_power_limit</td>" in html
    assert "using the csv fallback" in html
    assert not (tmp_path / "out" / "replicas.png").exists(), "a fixed-size job has no replicas plot"


def test_an_elastic_run_shows_its_replica_counts(tmp_path: Path, carbon_trace: Callable[[str], Path]) -> None:
    log = tmp_path / "run.jsonl"
    _write_paused_run(log, carbon_trace("GB_2022_hourly.csv"))
    with EventLog(log) as events:  # appended: a relaunch at 8 replicas, a planned pause, back at 2
        for hours, kind, count in ((0, "actual", 4), (0, "planned", 8), (0.1, "actual", 8), (2, "planned", 0),
                                   (5, "planned", 2), (5.1, "actual", 2)):
            events.write("replicas", T0 + timedelta(hours=hours), kind=kind, replicas=count)
        events.write("action", T0 + timedelta(hours=5), action="run", reason="clean again", replicas=2)
    run = load_run(log)
    assert [c for _, k, c in run.replicas if k == "actual"] == [4, 8, 2]
    index = build_report(log, tmp_path / "out")
    html = index.read_text()
    assert (tmp_path / "out" / "replicas.png").read_bytes().startswith(PNG_MAGIC) and 'src="replicas.png"' in html
    assert "2 changes; ran at 2, 4, 8 replicas, last 2" in html
    assert "<td>clean again</td><td></td><td></td><td>2</td>" in html


def test_counterfactual_replays_the_steps_back_to_back(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    with EventLog(log) as events:
        events.write("carbon", T0, intensity_g_per_kwh=100.0, kind="actual", zone="X")
        events.write("carbon", T0 + timedelta(hours=1), intensity_g_per_kwh=500.0, kind="actual", zone="X")
        events.write("carbon", T0 + timedelta(hours=2), intensity_g_per_kwh=50.0, kind="actual", zone="X")
        # The run waited out the dirty hour: ten 1 kWh steps, all in the 50 g hour.
        for k in range(1, 11):
            events.write("step", T0 + timedelta(hours=2, seconds=360 * k), duration_s=360.0, energy_j=3.6e6)
    run = load_run(log)
    assert sum(run.step_emissions_g(s) for s in run.steps) == pytest.approx(500.0)
    curve = counterfactual_run_now(run)
    assert curve[-1][0] == T0 + timedelta(hours=1)
    assert curve[-1][1] == pytest.approx(1000.0)  # run now: all ten in the 100 g hour


def test_bad_logs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing.jsonl"):
        load_run(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ConfigError, match="no events"):
        load_run(empty)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"t": "2022-01-01T00:00Z", "event": "step", "energy_j": "lots"}\n{"t": "x", "event": "state"}\n')
    with pytest.raises(ConfigError, match=r"event 1 \(step\): 'energy_j' must be a finite number"):
        load_run(bad)
    naive = tmp_path / "naive.jsonl"
    naive.write_text('{"t": "2022-01-01T00:00", "event": "state", "state": "running"}\n')
    with pytest.raises(ConfigError, match="no timezone"):
        load_run(naive)


def test_unknown_events_and_a_torn_last_line_still_render(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    log.write_text('{"t": "2022-01-01T00:00Z", "event": "state", "state": "waiting"}\n'
                   '{"t": "2022-01-01T01:00Z", "event": "from_the_future", "x": 1}\n'
                   '{"t": "2022-01-01T02:00Z", "event": "state", "state": "running"}\n'
                   '{"t": "2022-01-01T03:00Z", "event": "st')
    index = build_report(log, tmp_path / "out")
    assert "no steps in this log" not in index.read_text()  # the message lives in the PNG, not the page
    assert (tmp_path / "out" / "emissions.png").read_bytes().startswith(PNG_MAGIC)
