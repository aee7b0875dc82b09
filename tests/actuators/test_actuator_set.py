"""ActuatorSet: refusals never raise, the journal stays truthful, one owner per GPU."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from greentrain.actuators import (
    ActuatorSet,
    DeviceBusyError,
    Journal,
    Knob,
    KnobController,
)
from greentrain.errors import ActuationError, DeviceLostError
from greentrain.policies.base import Decision
from greentrain.testing import FileBackedGPU

pytestmark = pytest.mark.timeout(20)


def _gpu(tmp_path: Path, **kw: object) -> FileBackedGPU:
    return FileBackedGPU(tmp_path / "gpu.json", "a40", **kw)


def test_apply_journals_previous_value_before_change(tmp_path: Path) -> None:
    gpu = _gpu(tmp_path)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False, job="j1") as acts:
        assert acts.apply(Decision(power_limit_w=200.0)) == ["power_limit"]
        assert gpu.power_limit_w() == 200.0
        entry = Journal(tmp_path, gpu.uuid).entries()[Knob.POWER_LIMIT]
        assert (entry.previous, entry.uuid, entry.job) == (300.0, gpu.uuid, "j1")
        assert acts.apply(Decision(power_limit_w=150.0)) == ["power_limit"]
        # the first previous value wins: restore goes back to the original, not to 200 W
        assert Journal(tmp_path, gpu.uuid).entries()[Knob.POWER_LIMIT].previous == 300.0
        assert acts.apply(Decision(sm_clocks_mhz=(600, 900))) == ["sm_clocks"]
        assert acts.unrestored_count() == 2
    assert gpu.is_default()
    assert acts.unrestored_count() == 0


def test_same_value_is_not_an_action(tmp_path: Path) -> None:
    gpu = _gpu(tmp_path)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        assert acts.apply(Decision(power_limit_w=300.0)) == []
        assert Journal(tmp_path, gpu.uuid).entries() == {}


@pytest.mark.parametrize(
    ("decision", "action", "needle"),
    [
        (Decision(power_limit_w=500.0), "power_limit", "outside its constraints [100, 300] W"),
        (Decision(power_limit_w=20.0), "power_limit", "outside its constraints"),
        (Decision(sm_clocks_mhz=(100, 3000)), "sm_clocks", "supported SM clocks are 210..1740 MHz"),
        (Decision(sm_clocks_mhz=(1500, 900)), "sm_clocks", "min <= max"),
    ],
)
def test_bad_values_refused_clearly(tmp_path: Path, caplog: pytest.LogCaptureFixture, decision: Decision,
                                    action: str, needle: str) -> None:
    gpu = _gpu(tmp_path)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        with caplog.at_level(logging.WARNING):
            assert acts.apply(decision) == []
        assert acts.refused_total[action] == 1
        assert needle in caplog.text
        assert gpu.is_default() and gpu.set_calls == []
        assert Journal(tmp_path, gpu.uuid).entries() == {}


def test_no_permission_refused_with_fix_and_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gpu = _gpu(tmp_path, privileged=False)
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                assert acts.apply(Decision(power_limit_w=200.0)) == []
        assert acts.refused_total["power_limit"] == 3
        assert caplog.text.count("refused") == 1
        assert "greentrain daemon" in caplog.text and "CAP_SYS_ADMIN" in caplog.text
        assert Journal(tmp_path, gpu.uuid).entries() == {}, "a refused change must not stay journaled"
        assert gpu.total_energy_j() >= 0.0  # measuring goes on


def test_two_jobs_on_one_gpu_second_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first_gpu, second_gpu = _gpu(tmp_path), _gpu(tmp_path)
    with ActuatorSet([first_gpu], state_dir=tmp_path, install_hooks=False) as first:
        assert first.apply(Decision(power_limit_w=200.0)) == ["power_limit"]
        with ActuatorSet([second_gpu], state_dir=tmp_path, install_hooks=False) as second:
            second.recover()
            assert second.apply(Decision(power_limit_w=150.0)) == []
            assert second.refused_total["lock"] == 1 and second.refused_total["power_limit"] == 1
            assert "held by pid" in caplog.text
            assert second.unrestored_count() == 0
        # the second job's exit must not undo the first job's setting
        assert first_gpu.power_limit_w() == 200.0
    assert first_gpu.is_default()


def test_gpu_lost_mid_change_keeps_journal_then_next_start_restores(tmp_path: Path) -> None:
    gpu = _gpu(tmp_path)
    acts = ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False)
    acts.apply(Decision(power_limit_w=200.0))
    gpu.fail(DeviceLostError(f"GPU {gpu.uuid}: GPU_IS_LOST"))
    assert acts.apply(Decision(power_limit_w=150.0)) == []  # no exception into the step
    errors = acts.restore_all()
    assert errors and "GPU_IS_LOST" in errors[0]
    assert acts.unrestored_count() == 1
    acts.close()
    assert Knob.POWER_LIMIT in Journal(tmp_path, gpu.uuid).entries()
    # the GPU comes back (driver reload); the next start restores it
    healed = _gpu(tmp_path)
    with ActuatorSet([healed], state_dir=tmp_path, install_hooks=False) as later:
        assert later.recover() == 1
    assert healed.is_default()


def test_corrupt_journal_is_reported_not_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gpu = _gpu(tmp_path)
    journal = Journal(tmp_path, gpu.uuid)
    journal.path.write_text("{not json")
    with pytest.raises(ActuationError, match="corrupt journal"):
        journal.entries()
    with ActuatorSet([gpu], state_dir=tmp_path, install_hooks=False) as acts:
        acts.recover()
        assert acts.refused_total["recover"] == 1
        assert "corrupt journal" in caplog.text


def test_precision_goes_to_attached_controller(tmp_path: Path) -> None:
    class Target:
        def __init__(self) -> None:
            self.requested: list[str] = []

        def request(self, precision: str) -> bool:
            self.requested.append(precision)
            return True

    target = Target()
    with ActuatorSet([], state_dir=tmp_path, install_hooks=False, precision=target) as acts:
        assert acts.apply(Decision(precision="bf16")) == ["precision"]
    assert target.requested == ["bf16"]
    with ActuatorSet([], state_dir=tmp_path, install_hooks=False) as bare:
        assert bare.apply(Decision(precision="bf16")) == []
        assert bare.refused_total["precision"] == 1


def test_controller_busy_error_names_holder(tmp_path: Path) -> None:
    gpu = _gpu(tmp_path)
    a, b = KnobController(gpu, tmp_path), KnobController(gpu, tmp_path)
    a.acquire()
    with pytest.raises(DeviceBusyError, match=r"held by pid \d+"):
        b.acquire()
    a.release()
    b.acquire()
    b.release()
    assert json.loads((tmp_path / "gpu.json").read_text())["power_limit_w"] == 300.0
