"""``on_budget="shift"`` on a replayed trace: while the projection exceeds the budget the job takes the
net-optimal pause (here: over the two dirty hours) at the step where it starts to pay; under budget, or
with ``warn``, the job's own policy (run-now) is left alone."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ClockMonitor, RunNowPolicy, TraceSignals, drive, hourly  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, DeadlineGuard, PauseCost, Progress
from greentrain.engine import Engine
from greentrain.errors import ConfigError
from greentrain.policies.base import Action
from greentrain.policies.settings import PolicySettings
from greentrain.engine.budget import Budget

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)
J_PER_KWH = 3.6e6

pytestmark = pytest.mark.timeout(60)


def _run(budget: Budget) -> tuple[Engine, list[tuple[int, Action, str]]]:
    """A 1 kW job of 120 one-minute steps, 150 W while paused, on 100 | 600 600 | 150 150 150 g/kWh,
    deadline 6 h, deciding every step; the policy itself always says run."""
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [100, 600, 600, 150, 150, 150]), clock)
    engine = Engine(RunNowPolicy(),
                    Collaborators(clock=clock, signals=signals, monitor=ClockMonitor(clock, power_w=1000.0,
                                  idle_w=150.0)),
                    progress=Progress(steps_total=120, step_time_s=60),
                    deadline=DeadlineGuard(T0 + timedelta(hours=6), resume_overhead_s=0.0, simulated=True),
                    pause_cost=PauseCost(user_w=150.0),
                    budget=budget,
                    decide_interval_s=60,
                    countdown=False)
    waits = drive(engine, clock)
    pauses = [(w.step, w.decision.action, w.decision.reason) for w in waits]
    engine.close()
    return engine, pauses


def test_shift_pauses_over_the_dirty_hours_at_the_step_they_begin():
    # Run-now: 60 steps at 100 g/kWh + 60 at 600 = 100 + 600 = 700 g > 500 g: projected over from step 1.
    engine, pauses = _run(Budget(max_emissions_g=500.0, on_budget="shift"))
    # Hour 0 (100 g/kWh) is the cleanest: it runs (waiting from now instead would add 15 g and move an hour
    # to 150). At step 60 the clock enters hour 1 (600): pausing it and hour 2 costs 0.15 kW x 2 h x 600 =
    # 180 g of waiting but moves 600 g of running to 150: the shift fires there, and only there.
    assert [p[0] for p in pauses] == [60]
    assert pauses[0][1] == Action.PAUSE and pauses[0][2].startswith("budget shift (projected total")
    assert engine.progress.finished_at == T0 + timedelta(hours=4)  # hour 3 at 150 g/kWh; deadline 6 h met
    waiting_g = 0.15 * 2 * 600  # the held devices' draw through hours 1-2, integrated by the monitor double
    assert engine.ledger.emissions_g == pytest.approx(100 + waiting_g + 150)
    assert engine.ledger.avoided_g == pytest.approx(700 - (100 + waiting_g + 150))  # net: 270 g
    assert sum("shifting work to cleaner hours" in n for n in engine.notes) == 1  # warned once


@pytest.mark.parametrize("budget", [Budget(max_emissions_g=900.0, on_budget="shift"),  # run-now fits: no shift
                                    Budget(max_emissions_g=500.0, on_budget="warn")])
def test_no_shift_under_budget_or_in_warn_mode(budget):
    engine, pauses = _run(budget)
    assert pauses == []
    assert engine.ledger.emissions_g == pytest.approx(700.0)
    assert engine.progress.finished_at == T0 + timedelta(hours=2)


def test_shift_never_stops_the_job_once_the_budget_is_spent():
    engine, pauses = _run(Budget(max_emissions_g=250.0, on_budget="shift"))  # spent in the pause
    assert engine.finished and engine.ledger.emissions_g > 250.0
    assert engine.io.job_stats.snapshot().actions_total.get("stop", 0) == 0


def test_policy_settings_accept_shift_and_name_a_bad_value():
    assert Budget.resolve(None, PolicySettings(max_emissions_g=5.0, on_budget="shift")).mode == "shift"
    # A limit given to the Session / `greentrain run` takes the policy's on_budget unless it sets its own.
    assert Budget.resolve(Budget(max_emissions_g=9.0), PolicySettings(on_budget="shift")).mode == "shift"
    own = Budget(max_emissions_g=9.0, on_budget="warn")
    assert Budget.resolve(own, PolicySettings(on_budget="shift")).mode == "warn"
    assert Budget.resolve(Budget(max_emissions_g=9.0), PolicySettings()).mode == "stop"
    with pytest.raises(ConfigError, match="on_budget"):
        PolicySettings(on_budget="shuffle")
