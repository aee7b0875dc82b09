"""Budgets on a replayed trace: the warning and the stop fire at the right step; bad limits name the field."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ClockMonitor, RunNowPolicy, TraceSignals, drive, hourly  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, Progress
from greentrain.engine import Engine
from greentrain.errors import ConfigError
from greentrain.job.options import JobOptions
from greentrain.policies.settings import PolicySettings
from greentrain.policies.base import Action
from greentrain.engine.budget import Budget

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)
J_PER_KWH = 3.6e6

pytestmark = pytest.mark.timeout(30)


def _engine(budget: Budget) -> tuple[Engine, FrozenClock]:
    clock = FrozenClock(T0)
    # 200 g/kWh now, 400 g/kWh from the second hour: a 1 kW job of 120 one-minute steps emits
    # 60 x 1/60 kWh x 200 = 200 g in hour 0, then 400 g in hour 1: 600 g in all.
    signals = TraceSignals(hourly(T0, [200, 400, 400]), clock)
    engine = Engine(RunNowPolicy(),
                    Collaborators(clock=clock, signals=signals, monitor=ClockMonitor(clock, power_w=1000.0)),
                    progress=Progress(steps_total=120, step_time_s=60),
                    budget=budget,
                    decide_interval_s=600,
                    countdown=False)
    return engine, clock


def _drive(engine: Engine, clock: FrozenClock) -> int | None:
    """Run until done or stopped; the step at which the engine said STOP."""
    waits = drive(engine, clock, tokens=0)
    return waits[-1].step if waits and waits[-1].decision.action == Action.STOP else None


def test_warning_fires_once_when_the_projection_first_exceeds_the_budget():
    engine, clock = _engine(Budget(max_emissions_g=450.0, on_budget="warn"))
    assert _drive(engine, clock) is None  # warn only: the job finishes
    warnings = [n for n in engine.notes if n.startswith("budget: projected")]
    assert len(warnings) == 1 and "450 g" in warnings[0]
    # The projection at step 1 priced the remaining 119 min at the forecast mean (200, 400 -> 300 g/kWh):
    # 3.33 + 119/60 kWh x 300 = 598 g > 450 g already: the warning came at the first decision.
    assert engine.budget.projected_g == pytest.approx(600.0, rel=0.02)
    stats = engine.io.job_stats.snapshot()
    assert 450.0 - engine.ledger.emissions_g <= stats.budget_remaining_g < 0  # as of the last decision
    assert stats.budget_projected_g == pytest.approx(engine.budget.projected_g)
    assert engine.ledger.emissions_g == pytest.approx(600.0)


def test_stop_fires_at_the_step_the_budget_is_spent():
    # 200 g after 60 steps, then 400/60 = 6.67 g per step: 450 g is reached at step 60 + 37.5 -> step 98.
    engine, clock = _engine(Budget(max_emissions_g=450.0))
    assert _drive(engine, clock) == 98
    assert engine.ledger.emissions_g == pytest.approx(200 + 38 * 400 / 60)
    assert engine.decision.action == Action.STOP and "budget spent" in engine.decision.reason
    assert engine.io.job_stats.snapshot().actions_total["stop"] == 1


def test_energy_budget_stops_by_joules():
    engine, clock = _engine(Budget(max_energy_j=30 * 60 * 1000.0))
    assert _drive(engine, clock) == 30


@pytest.mark.parametrize(("kwargs", "field"), [({"max_emissions_g": -1}, "max_emissions_g"),
                                              ({"max_energy_j": "lots"}, "max_energy_j"),
                                              ({"max_emissions_g": float("nan")}, "max_emissions_g"),
                                              ({"on_budget": "panic"}, "on_budget")])
def test_bad_budget_names_the_field(kwargs, field):
    """A budget is checked where it is given: a job's settings, or a policy file's [settings]."""
    with pytest.raises(ConfigError, match=f"^{field}: "):
        if field == "on_budget":
            PolicySettings(**kwargs)
        else:
            JobOptions(**kwargs)
