"""The engine wiring shared by the framework callbacks: options, deadlines across relaunches, signals."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta

import pytest

from greentrain.clock import FrozenClock
from greentrain.errors import ConfigError
from greentrain.integrations.driver import StepDriver, callback_job
from greentrain.job.state import EngineState

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)


def driver(**options) -> StepDriver:
    settings = {"policy": "run-now", "devices": False, "progress": False, "clock": FrozenClock(NOW), **options}
    return StepDriver(*callback_job(**settings))


def test_bad_options_are_config_errors_naming_the_argument() -> None:
    with pytest.raises(ConfigError, match="pause_mode: 'sleep'"):
        callback_job(pause_mode="sleep")
    with pytest.raises(ConfigError, match="pause_mode: 'auto' is not 'checkpoint' or 'suspend'"):
        StepDriver(*callback_job(pause_mode="auto"))  # a callback cannot release the devices mid-fit
    with pytest.raises(ConfigError, match="zonee: not an option"):
        callback_job(zonee="GB")
    with pytest.raises(ConfigError, match="unknown policy or preset 'greenest'"):
        driver(policy="greenest").open(steps_total=10, steps_done=0)
    with pytest.raises(ConfigError, match="deadline: 'soon'"):
        driver(deadline="soon").open(steps_total=10, steps_done=0)


def test_relative_deadline_counts_from_the_first_start_not_the_relaunch() -> None:
    first = NOW - timedelta(hours=5)
    prior = EngineState(job="greentrain", deadline=(first + timedelta(hours=12)).isoformat(), steps_done=40)
    relaunched = driver(deadline="+12")
    relaunched.open(steps_total=100, steps_done=40, prior=prior)
    assert relaunched.engine.deadline.at == first + timedelta(hours=12)
    relaunched.close()
    explicit = driver(deadline=NOW + timedelta(hours=3))  # an absolute deadline given now wins
    explicit.open(steps_total=100, steps_done=40, prior=prior)
    assert explicit.engine.deadline.at == NOW + timedelta(hours=3)
    explicit.close()


@pytest.mark.timeout(30)
def test_stop_signal_stops_at_the_next_step_boundary_and_handlers_are_restored() -> None:
    previous = signal.getsignal(signal.SIGUSR2)
    d = driver(stop_signals=(signal.SIGUSR2,))
    d.open(steps_total=10, steps_done=0)
    d.step_begin()
    assert d.step_end() is False
    d.step_begin()
    os.kill(os.getpid(), signal.SIGUSR2)  # arrives mid-step: nothing happens until the boundary
    assert d.step_end() is True
    assert d.paused and d.stopped_by_signal and d.resume_at is None
    assert d.wait_for_resume() is False  # the scheduler relaunches; nothing to wait for here
    assert d.state().steps_done == 2
    d.close()
    assert signal.getsignal(signal.SIGUSR2) is previous
    assert d.engine is None and d.state() is None


@pytest.mark.parametrize("how", ["option", "env"])
def test_advisory_mode_replaces_the_given_actuators_and_writes_nothing(
    how: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from greentrain.actuators import ActuatorSet
    from greentrain.actuators.advisory import AdvisoryActuators
    from greentrain.policies.base import Decision
    from greentrain.testing import FakeGPU

    monkeypatch.delenv("GREENTRAIN_ADVISE_ONLY", raising=False)
    if how == "env":
        monkeypatch.setenv("GREENTRAIN_ADVISE_ONLY", "1")
    gpu = FakeGPU("a40")
    limit_w = gpu.power_limit_w()
    with ActuatorSet([gpu], state_dir=tmp_path / "state", install_hooks=False) as actuators:
        d = driver(actuators=actuators, **({"actuation": "advise"} if how == "option" else {}))
        d.open(steps_total=10, steps_done=0)
        assert isinstance(d.engine.io.actuators, AdvisoryActuators) and d.engine.io.actuators.gpus == [gpu]
        d.engine.adopter.adopt(d.engine, Decision(power_limit_w=200.0), NOW)
        assert d.job_stats.snapshot().advised_power_limit_w == 200.0
        d.close()
    assert gpu.set_calls == [] and gpu.power_limit_w() == limit_w
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())
