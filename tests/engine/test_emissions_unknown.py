"""No carbon signal: emissions are unknown (null with the reason), never 0 g — log, stats, metrics, summary."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ClockMonitor, RunNowPolicy, ThresholdPolicy, TraceSignals, drive, hourly  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, Progress
from greentrain.engine import Engine
from greentrain.events import EventLog, read_events
from greentrain.exporters.collector import GreentrainCollector
from greentrain.policies.base import Action
from greentrain.engine.ledger import CarbonLedger

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.timeout(30)


def _run(engine: Engine, clock: FrozenClock) -> None:
    assert drive(engine, clock, tokens=10) == []  # runs now, start to end
    engine.close()


@pytest.mark.parametrize("case", ["provider failing", "no signal configured"])
def test_emissions_are_unknown_with_the_reason(case: str, tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    signals = None
    policy = RunNowPolicy()
    if case == "provider failing":  # e.g. Electricity Maps without a key, every call refused
        signals = TraceSignals(hourly(T0, [300.0] * 4), clock)
        signals.fail = True
        policy = ThresholdPolicy(200)
    log = EventLog(tmp_path / "run.jsonl")
    engine = Engine(policy,
                    Collaborators(clock=clock, signals=signals, monitor=ClockMonitor(clock), event_log=log),
                    progress=Progress(steps_total=5, step_time_s=60),
                    countdown=False)
    _run(engine, clock)
    log.close()

    events = read_events(tmp_path / "run.jsonl")
    steps = [e for e in events if e["event"] == "step"]
    summary = [e for e in events if e["event"] == "summary"][-1]
    reason = "carbon signal unavailable" if case == "provider failing" else "no carbon signal"
    assert all(s["emissions_g"] is None and reason in s["emissions_unknown"] for s in steps)
    assert summary["emissions_g"] is None and summary["emissions_avoided_g"] is None
    assert reason in summary["emissions_unknown"] and summary["unpriced_energy_j"] == pytest.approx(5 * 60 * 250)

    stats = engine.io.job_stats.snapshot()
    assert not stats.emissions_known and reason in stats.emissions_unknown_reason
    assert stats.emissions_g == 0.0 and stats.unpriced_energy_j == pytest.approx(75_000)

    collector = GreentrainCollector(job="j", job_stats=engine.io.job_stats)
    names = {s.name: s for family in collector.collect() for s in family.samples}
    assert "greentrain_emissions_grams_total" not in names, "unknown is absent, not 0"
    assert "greentrain_emissions_avoided_grams_total" not in names
    assert names["greentrain_emissions_unpriced_energy_joules_total"].value == pytest.approx(75_000)


def test_a_known_signal_prices_every_joule(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [300.0] * 4), clock)
    engine = Engine(RunNowPolicy(),
                    Collaborators(clock=clock, signals=signals, monitor=ClockMonitor(clock)),
                    progress=Progress(steps_total=5, step_time_s=60),
                    countdown=False)
    _run(engine, clock)
    stats = engine.io.job_stats.snapshot()
    assert stats.emissions_known and stats.emissions_unknown_reason is None
    assert stats.emissions_g == pytest.approx(75_000 / 3.6e6 * 300.0)


def test_ledger_zero_energy_is_zero_grams_but_unpriced_energy_is_unknown() -> None:
    ledger = CarbonLedger()
    assert ledger.record(0.0, T0, T0).emissions_g == 0.0
    entry = ledger.record(100.0, T0, T0)
    assert entry.emissions_g is None and not entry.priced and entry.avoided_g == 0.0
    assert ledger.total_emissions_g() is None and ledger.total_avoided_g() is None
    ledger.observe(hourly(T0, [360.0])[0])
    assert ledger.record(3.6e6, T0, T0).emissions_g == pytest.approx(360.0)
    assert ledger.total_emissions_g() is None, "part of the energy is still unpriced"
