"""Pause mode ``auto``: release (checkpoint, exit, requeue) when holding the devices costs more."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ClockMonitor  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, DeadlineGuard
from greentrain.policies import load_policy
from greentrain.engine import Engine
from greentrain.events import EventLog, read_events
from greentrain.policies.base import Action, Decision
from greentrain.engine.pausemode import auto_mode, choose_pause

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.timeout(30)


def test_releases_when_holding_costs_more_than_checkpoint_and_restart():
    # H100-like: 71 W idle, 600 W running, 5 min to checkpoint and restart = 180 kJ.
    # Holding 2 h = 511 kJ > 180 kJ: release. Holding 30 min = 128 kJ < 180 kJ: hold.
    long = choose_pause(pause_s=7200, waiting_power_w=71.0, running_power_w=600.0, restart_s=300, can_release=True)
    assert long.mode == "checkpoint" and long.released and "release" in long.reason and "511.2 kJ" in long.reason
    short = choose_pause(pause_s=1800, waiting_power_w=71.0, running_power_w=600.0, restart_s=300, can_release=True)
    assert short.mode == "suspend" and not short.released and short.reason.startswith("hold")
    alone = choose_pause(pause_s=7200, waiting_power_w=71.0, running_power_w=600.0, restart_s=300, can_release=False)
    assert alone.mode == "suspend" and "nothing would relaunch" in alone.reason


def test_auto_records_its_choice_and_stops_charging_waiting_when_released(tmp_path):
    clock = FrozenClock(T0)
    monitor = ClockMonitor(clock, power_w=600.0, idle_w=71.0)
    log = EventLog(tmp_path / "run.jsonl")
    engine = Engine(load_policy("run-now"),
                    Collaborators(clock=clock, monitor=monitor, event_log=log),
                    deadline=DeadlineGuard(None, resume_overhead_s=300, simulated=True),
                    countdown=False)
    engine.pause_cost.observe_start(71.0)
    pause = Decision(action=Action.PAUSE, until=T0 + timedelta(hours=2), reason="dirty")
    assert engine.pause_cost.value_w == pytest.approx(71.0)
    assert auto_mode(engine, pause, can_release=True) == "checkpoint"
    assert engine.pause_cost.value_w == 0.0 and engine.pause_cost.source == "hardware released while paused"
    short = Decision(action=Action.PAUSE, until=T0 + timedelta(minutes=20), reason="dirty")
    assert auto_mode(engine, short, can_release=True) == "suspend"
    assert engine.pause_cost.value_w == pytest.approx(71.0)
    assert engine.io.job_stats.snapshot().actions_total["release"] == 1
    assert engine.io.job_stats.snapshot().actions_total["hold"] == 1
    log.close()
    choices = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "pause_mode"]
    assert [(e["mode"], e["released"]) for e in choices] == [("checkpoint", True), ("suspend", False)]
    assert all(e["reason"] for e in choices)
