"""The engine's waiting draw: fed to the policy, measured during pauses, priced net, and robust
to a failing reading (``greentrain.engine.pausecost``)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ClockMonitor, ThresholdPolicy, TraceSignals, drive, hourly  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, DeadlineGuard, PauseCost, Progress
from greentrain.job.options import JobOptions
from greentrain.engine import Engine
from greentrain.errors import ConfigError
from greentrain.events import EventLog, read_events
from greentrain.policies.base import Action

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)
J_PER_KWH = 3.6e6

pytestmark = pytest.mark.timeout(30)


class HeldDevicesMonitor(ClockMonitor):
    """Reads ``at_rest_w`` while no step runs (the H100 at rest: 71 W); a pause right after load
    draws ``idle_w`` (~130 W measured in the seconds after load). From ``fail_after`` on the energy
    counter raises, as a lost device does."""

    def __init__(self, clock, *, power_w: float, at_rest_w: float, idle_w: float) -> None:
        super().__init__(clock, power_w=power_w, idle_w=idle_w)
        self.at_rest_w = at_rest_w
        self.fail_after: datetime | None = None

    def power_w(self) -> float:
        return self.power if self._busy else self.at_rest_w

    def total_energy_j(self) -> float:
        if self.fail_after is not None and self.clock.now() >= self.fail_after:
            raise RuntimeError("test: NVML_ERROR_GPU_IS_LOST")
        return super().total_energy_j()


def _job(tmp_path: Path, pause_cost: PauseCost | None = None):
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [100, 500, 500, 100, 100, 100]), clock)
    monitor = HeldDevicesMonitor(clock, power_w=250.0, at_rest_w=70.0, idle_w=130.0)
    policy = ThresholdPolicy(200)
    log = EventLog(tmp_path / "run.jsonl")
    engine = Engine(policy, Collaborators(clock=clock, signals=signals, monitor=monitor, event_log=log),
                    progress=Progress(steps_total=90), deadline=DeadlineGuard(T0 + timedelta(hours=6), simulated=True),
                    pause_cost=pause_cost, countdown=False, decide_interval_s=60)
    return clock, monitor, policy, log, engine


def test_net_accounting_over_a_replayed_pause_matches_hand_integration(tmp_path):
    clock, monitor, policy, log, engine = _job(tmp_path)
    drive(engine, clock)
    engine.close()
    log.close()
    # 60 steps of 60 s in hour 0 (100 g/kWh), paused hours 1-2 (500), 30 steps in hour 3 (100); 250 W running.
    running_g = 90 * 60 * 250 / J_PER_KWH * 100  # 37.5 g
    waiting_j = 2 * 3600 * 130.0  # the held devices' draw through the pause, integrated
    waiting_g = waiting_j / J_PER_KWH * 500  # 130 g
    run_now_g = 60 * 60 * 250 / J_PER_KWH * 100 + 30 * 60 * 250 / J_PER_KWH * 500  # 25 + 62.5 g
    assert engine.ledger.emissions_g == pytest.approx(running_g + waiting_g)
    assert engine.ledger.avoided_g == pytest.approx(run_now_g - running_g - waiting_g)  # net: -80 g
    assert engine.io.job_stats.snapshot().emissions_avoided_g == pytest.approx(run_now_g - running_g - waiting_g)
    assert engine.pause_cost.energy_j == pytest.approx(waiting_j)
    # Before the pause the policy got the devices' reading at start; after it, the measured draw.
    assert policy.snapshots[0].waiting_power_w == pytest.approx(70.0)
    assert policy.snapshots[-1].waiting_power_w == pytest.approx(130.0)
    events = read_events(tmp_path / "run.jsonl")
    labels = [(e["waiting_power_w"], e["source"]) for e in events if e["event"] == "waiting_power"]
    assert labels[0] == (pytest.approx(70.0), "devices' reading at start")
    assert labels[-1] == (pytest.approx(130.0), "measured during a pause")
    summary = events[-1]
    assert summary["event"] == "summary" and summary["waiting_energy_j"] == pytest.approx(waiting_j)


def test_a_failing_idle_reading_keeps_the_last_good_value_with_a_note(tmp_path):
    clock, monitor, policy, log, engine = _job(tmp_path)

    def lose_the_counter() -> None:  # mid-pause: the reading at the pause's start still works
        monitor.fail_after = clock.now() + timedelta(minutes=1)

    drive(engine, clock, on_pause=lose_the_counter)  # never raises: the job finishes
    assert engine.finished and engine.progress.steps_done == 90
    assert engine.pause_cost.value_w == pytest.approx(70.0) and engine.pause_cost.source == "devices' reading at start"
    assert any("idle power reading failed during a pause" in note and "70 W" in note for note in engine.notes)


def test_released_hardware_and_the_users_figure(tmp_path):
    clock, monitor, policy, log, engine = _job(tmp_path, PauseCost(released=True))
    drive(engine, clock)
    assert {s.waiting_power_w for s in policy.snapshots} == {0.0}
    clock, monitor, policy, log, engine = _job(tmp_path, PauseCost(user_w=55.0))
    drive(engine, clock)
    assert {s.waiting_power_w for s in policy.snapshots} == {55.0}
    assert engine.pause_cost.source == "set by the user"


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "lots"])
def test_bad_waiting_power_names_the_option(bad):
    with pytest.raises(ConfigError, match="^waiting_power_w: "):  # checked once, where a job's settings are
        JobOptions(waiting_power_w=bad)
