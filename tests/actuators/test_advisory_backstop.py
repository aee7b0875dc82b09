"""GREENTRAIN_ADVISE_ONLY=1 stops every change at KnobController, even through a hand-built ActuatorSet."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.actuators import ActuatorSet, KnobController
from greentrain.actuators.advisory import AdvisoryModeError
from greentrain.policies.base import Decision
from greentrain.testing import FakeGPU


def test_actuator_set_refuses_without_touching_the_gpu_or_the_journal(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENTRAIN_ADVISE_ONLY", "1")
    gpu = FakeGPU("a40")
    before = gpu.power_limit_w()
    with ActuatorSet([gpu], state_dir=tmp_path / "state", install_hooks=False,
                     daemon_socket=tmp_path / "daemon.sock") as actuators:
        applied = actuators.apply(Decision(power_limit_w=200.0, sm_clocks_mhz=(210, 1200)))
        assert applied == [] and actuators.refused_total == {"power_limit": 1, "sm_clocks": 1}
        assert actuators.unrestored_count() == 0
    assert gpu.set_calls == [] and gpu.power_limit_w() == before
    journals = [p for p in (tmp_path / "state").glob("*") if p.suffix == ".json"] if (tmp_path / "state").exists() \
        else []
    assert journals == []


def test_controller_raises_before_locking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENTRAIN_ADVISE_ONLY", "yes")
    controller = KnobController(FakeGPU("a40"), tmp_path / "state")
    with pytest.raises(AdvisoryModeError, match="advisory mode is on"):
        controller.set_power_limit_w(200.0)
    with pytest.raises(AdvisoryModeError, match="SM clocks 210-1200 MHz"):
        controller.lock_sm_clocks_mhz(210, 1200)
    assert not controller.lock.held and controller.pending() == 0
    monkeypatch.setenv("GREENTRAIN_ADVISE_ONLY", "0")
    assert controller.set_power_limit_w(200.0) is True  # the control: the same call applies without the switch
    controller.restore()
    controller.release()
