"""Engine: decisions at step boundaries, deadline guard, accounting, degradation."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import (  # noqa: E402
    BrokenPolicy,
    ClockMonitor,
    RunNowPolicy,
    ThresholdPolicy,
    TraceSignals,
    WindowPolicy,
    drive,
    hourly,
    varying,
)

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, DeadlineGuard, Progress
from greentrain.engine import Engine
from greentrain.errors import DeadlineError
from greentrain.job.options import JobOptions
from greentrain.events import EventLog, read_events
from greentrain.jobstats import JobState, JobStats
from greentrain.policies.base import Action

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.timeout(30)


def test_delayed_start_and_emissions_versus_run_now(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0 - timedelta(hours=1), [100, 400, 400, 100, 100, 100, 100]), clock)
    stats = JobStats(job="j")
    log = EventLog(tmp_path / "run.jsonl")
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals, monitor=ClockMonitor(clock, power_w=250.0),
                                  event_log=log, job_stats=stats),
                    progress=Progress(steps_total=100, step_time_s=60),
                    deadline=DeadlineGuard(T0 + timedelta(hours=5), simulated=True),
                    countdown=False)
    waits = drive(engine, clock, tokens=10)
    engine.close()
    log.close()
    # Started at the first clean hour, not before.
    assert [w[:3] for w in waits] == [(0, T0, T0 + timedelta(hours=2))]
    energy_kwh = 100 * 60 * 250 / 3.6e6
    assert engine.ledger.energy_j == pytest.approx(100 * 60 * 250)
    assert engine.ledger.emissions_g == pytest.approx(energy_kwh * 100)
    # Run-now would have run 01:00-02:40, all at 400 g/kWh.
    assert engine.ledger.avoided_g == pytest.approx(energy_kwh * 300)
    snap = stats.snapshot()
    assert snap.steps_total == 100 and snap.tokens_total == 1000
    assert snap.emissions_avoided_g == pytest.approx(energy_kwh * 300)
    assert snap.actions_total["delay_start"] == 1
    events = read_events(tmp_path / "run.jsonl")
    kinds = {e["event"] for e in events}
    assert {"step", "carbon", "forecast", "state", "action", "summary"} <= kinds
    assert [e["state"] for e in events if e["event"] == "state"][:2] == ["waiting", "running"]
    assert sum(1 for e in events if e["event"] == "step") == 100
    assert events[-1]["event"] == "summary" and events[-1]["emissions_avoided_g"] == pytest.approx(energy_kwh * 300)


def test_pause_mid_run_resumes_at_clean_hour() -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [100, 500, 500, 100, 100, 100]), clock)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=90),
                    deadline=DeadlineGuard(T0 + timedelta(hours=6), simulated=True),
                    decide_interval_s=60,
                    countdown=False)
    waits = drive(engine, clock, tokens=10)
    assert len(waits) == 1
    step, paused_at, resumed_at, _decision = waits[0]
    assert paused_at == T0 + timedelta(hours=1) and resumed_at == T0 + timedelta(hours=3)
    assert step == 60
    assert engine.progress.steps_done == 90
    assert engine.state == JobState.RUNNING


@pytest.mark.parametrize("slow_factor", [1.0, 1.5, 2.0, 3.0])
def test_deadline_guard_resumes_early_when_steps_slow_down(slow_factor: float) -> None:
    """A plan made at the measured step time slips when steps slow down; the guard still meets the deadline."""
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(100, 12)), clock)
    steps_total, base_s = 200, 10.0
    deadline = T0 + timedelta(seconds=steps_total * base_s * 3.5)
    # The policy wants to pause far past the deadline; slow-downs start before the pause.
    policy = WindowPolicy(T0 + timedelta(seconds=800), T0 + timedelta(hours=10))
    engine = Engine(policy,
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=steps_total),
                    deadline=DeadlineGuard(deadline, simulated=True),
                    decide_interval_s=30,
                    countdown=False)

    def step_s(i: int) -> float:
        return base_s if i < 40 else base_s * slow_factor

    waits = drive(engine, clock, step_s=step_s, tokens=10)
    assert engine.progress.steps_done == steps_total
    assert clock.now() <= deadline
    assert len(waits) == 1, "the job did pause"
    _step, paused_at, resumed_at, _decision = waits[0]
    assert resumed_at < policy.pause_to, "resumed before the policy's plan"
    # And not needlessly early: no more than the guard's safety margin ahead of the last safe moment.
    slack_s = (deadline - clock.now()).total_seconds()
    assert slack_s < 0.2 * steps_total * base_s * slow_factor


def test_deadline_guard_refuses_a_pause_the_deadline_cannot_afford() -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(100, 4)), clock)
    policy = WindowPolicy(T0, T0 + timedelta(hours=3))
    engine = Engine(policy,
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=100, step_time_s=10.0),
                    deadline=DeadlineGuard(T0 + timedelta(seconds=1000), simulated=True),
                    decide_interval_s=30,
                    countdown=False)
    decision = engine.begin()
    assert decision.action == Action.RUN and "deadline guard" in decision.reason


def test_deadline_in_the_past_or_too_short() -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(100, 4)), clock)
    past = Engine(RunNowPolicy(),
                  Collaborators(clock=clock, signals=signals),
                  progress=Progress(steps_total=10, step_time_s=1.0),
                  deadline=DeadlineGuard(T0 - timedelta(minutes=1), simulated=True),
                  countdown=False)
    with pytest.raises(DeadlineError, match="in the past"):
        past.begin()
    short = Engine(RunNowPolicy(),
                   Collaborators(clock=clock, signals=signals),
                   progress=Progress(steps_total=1000, step_time_s=60.0),
                   deadline=DeadlineGuard(T0 + timedelta(hours=1), simulated=True),
                   countdown=False)
    with pytest.raises(DeadlineError, match="best-effort"):
        short.begin()
    best = Engine(ThresholdPolicy(0),
                  Collaborators(clock=clock, signals=signals),
                  progress=Progress(steps_total=1000, step_time_s=60.0),
                  deadline=DeadlineGuard(T0 + timedelta(hours=1), policy="best-effort", simulated=True),
                  countdown=False)
    decision = best.begin()
    assert decision.action == Action.RUN and best.deadline.best_effort
    assert any("best-effort" in note for note in best.notes)


def test_naive_deadline_is_refused() -> None:
    from greentrain.errors import ConfigError

    with pytest.raises(ConfigError, match="^deadline: naive"):  # refused with the job's settings
        JobOptions(deadline=datetime(2022, 3, 2))


def test_carbon_signal_failure_degrades_to_run_now_with_a_note() -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [500, 500, 100, 100]), clock)
    signals.fail = True
    monitor = ClockMonitor(clock)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals, monitor=monitor),
                    progress=Progress(steps_total=20, step_time_s=60),
                    decide_interval_s=60,
                    countdown=False)
    waits = drive(engine, clock, tokens=10)
    assert waits == [] and engine.progress.steps_done == 20
    assert any("carbon signal unavailable" in n for n in engine.notes)
    # No intensity ever known: energy is still counted, emissions not invented.
    assert engine.ledger.energy_j > 0 and engine.ledger.emissions_g == 0


def test_signal_outage_mid_run_keeps_last_value_and_recovers() -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, [100, 100, 500, 500, 100, 100]), clock)
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals, monitor=ClockMonitor(clock)),
                    progress=Progress(steps_total=200),
                    deadline=DeadlineGuard(T0 + timedelta(hours=8), simulated=True),
                    decide_interval_s=60,
                    countdown=False)
    engine.begin()
    for _ in range(30):
        engine.step_begin()
        clock.advance(60)
        engine.step_end()
    signals.fail = True
    for _ in range(10):
        engine.step_begin()
        clock.advance(60)
        engine.step_end()
    assert engine.ledger.emissions_g > 0
    signals.fail = False
    decision = None
    while engine.progress.steps_done < 200:
        engine.step_begin()
        clock.advance(60)
        decision = engine.step_end()
        if decision.action != Action.RUN:
            break
    assert decision is not None and decision.action == Action.PAUSE  # back in control once the signal returns


def test_policy_and_monitor_failures_never_reach_training() -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(100, 3)), clock)
    monitor = ClockMonitor(clock)
    monitor.fail = True
    engine = Engine(BrokenPolicy(),
                    Collaborators(clock=clock, signals=signals, monitor=monitor),
                    progress=Progress(steps_total=5, step_time_s=1),
                    countdown=False)
    drive(engine, clock, step_s=1.0, tokens=10)
    assert engine.progress.steps_done == 5
    assert any("policy" in n and "ZeroDivisionError" in n for n in engine.notes)
    assert any("monitor.step_end failed" in n for n in engine.notes)


def test_decisions_are_rate_limited_between_replans() -> None:
    clock = FrozenClock(T0)
    signals = TraceSignals(hourly(T0, varying(100, 4)), clock)
    policy = ThresholdPolicy(200)
    engine = Engine(policy,
                    Collaborators(clock=clock, signals=signals),
                    progress=Progress(steps_total=100, step_time_s=1),
                    decide_interval_s=30,
                    countdown=False)
    drive(engine, clock, step_s=1.0, tokens=10)
    # 100 s of steps with a re-plan every 30 s: a handful of decisions, not one per step.
    assert 3 <= len(policy.snapshots) <= 8
    snap = policy.snapshots[-1]
    assert snap.steps_total == 100 and snap.step_time_s == pytest.approx(1.0)
    assert snap.work_remaining_s == pytest.approx((100 - snap.steps_done) * 1.0)


class _PowerCapPolicy(RunNowPolicy):
    """Runs, asking for a lower power limit (what the carbon-aware power policy does in a dirty hour)."""

    name = "test-power-cap"

    def decide(self, snapshot, now):
        from greentrain.policies.base import Decision

        return Decision(action=Action.RUN, power_limit_w=200.0, reason="dirty: cap power")


@pytest.mark.timeout(30)
def test_power_decisions_go_through_the_actuators_and_are_restored(tmp_path: Path) -> None:
    from greentrain.actuators import ActuatorSet
    from greentrain.testing import FakeGPU

    gpu = FakeGPU("a40", "imagenet/resnet50")
    default_w = gpu.power_limit_w()
    actuators = ActuatorSet([gpu], state_dir=tmp_path / "state", job="t", install_hooks=False)
    actuators.recover()
    clock = FrozenClock(T0)
    stats = JobStats(job="t")
    engine = Engine(_PowerCapPolicy(),
                    Collaborators(clock=clock, signals=TraceSignals(hourly(T0, varying(300, 3)), clock),
                                  actuators=actuators, job_stats=stats),
                    progress=Progress(steps_total=5, step_time_s=1),
                    countdown=False)
    drive(engine, clock, step_s=1.0, tokens=10)
    assert gpu.power_limit_w() == pytest.approx(200.0)
    snap = stats.snapshot()
    assert snap.power_limit_w == 200.0 and snap.actions_total["power_limit"] >= 1
    assert snap.settings_unrestored == 1
    engine.close()
    assert gpu.power_limit_w() == pytest.approx(default_w), "restored at close"
    actuators.close()
