"""A change interrupted at any bytecode leaves a state the next restore undoes.

An exception raised from a trace function at the k-th opcode executed inside
the actuator code (and the fake GPU's) stands for a KeyboardInterrupt or
SystemExit landing there. For every k we check the journal-first invariant:
either no entry and the old value, or an entry holding the original value and
the old or the new value; then ``restore_all`` brings back the defaults.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import greentrain.actuators as actuators_pkg
from greentrain.actuators import ActuatorSet, Journal, Knob
from greentrain.policies.base import Decision
from greentrain.testing import FileBackedGPU

TRACED = (str(Path(actuators_pkg.__file__).parent), str(Path(FileBackedGPU.__module__.replace(".", "/"))))


class _Interrupt(BaseException):
    """Raised at the chosen opcode (a BaseException, like KeyboardInterrupt)."""


def _run_interrupted(fn: Any, at: int) -> bool:
    """Run ``fn`` raising _Interrupt at opcode number ``at`` of traced code; True if it was interrupted."""
    count = [0]

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if not any(part in frame.f_code.co_filename for part in TRACED):
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            count[0] += 1
            if count[0] == at:
                raise _Interrupt
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    except _Interrupt:
        return True
    finally:
        sys.settrace(None)
    return False


@pytest.mark.timeout(280)
@pytest.mark.parametrize("start_w", [None, 200.0], ids=["from-default", "from-changed"])
def test_change_interrupted_at_any_opcode_is_restorable(tmp_path: Path, start_w: float | None) -> None:
    at, interrupted = 0, True
    while interrupted:
        at += 1 if at < 400 else 7  # every opcode of the journaling part, then a sample of the rest
        run = tmp_path / f"k{at}"
        run.mkdir(parents=True)
        gpu = FileBackedGPU(run / "gpu.json", "a40")
        default_w = gpu.power_limit_constraints().default_w
        acts = ActuatorSet([gpu], state_dir=run / "state", install_hooks=False)
        acts.recover()
        if start_w is not None:
            acts.apply(Decision(power_limit_w=start_w))
        old_w = gpu.power_limit_w()
        interrupted = _run_interrupted(lambda: acts.apply(Decision(power_limit_w=125.0)), at)
        hw_w = gpu.power_limit_w()
        entry = Journal(run / "state", gpu.uuid).entries().get(Knob.POWER_LIMIT)
        if entry is None:
            assert hw_w == old_w == default_w, f"opcode {at}: changed without a journal entry"
        else:
            assert entry.previous == default_w, f"opcode {at}: journal holds {entry.previous}, not the original"
            assert hw_w in (old_w, 125.0), f"opcode {at}: GPU at {hw_w}"
        assert acts.restore_all() == []
        assert gpu.is_default() and acts.unrestored_count() == 0, f"opcode {at}: not restored"
        acts.close()
    print(f"apply took {at} traced opcodes")
    assert at > 400, "the change should take many opcodes"


@pytest.mark.timeout(280)
def test_restore_interrupted_at_any_opcode_is_finished_by_the_next(tmp_path: Path) -> None:
    at, interrupted = 0, True
    while interrupted:
        at += 1 if at < 400 else 7
        run = tmp_path / f"k{at}"
        run.mkdir(parents=True)
        gpu = FileBackedGPU(run / "gpu.json", "a40")
        acts = ActuatorSet([gpu], state_dir=run / "state", install_hooks=False)
        acts.apply(Decision(power_limit_w=125.0, sm_clocks_mhz=(600, 900)))
        interrupted = _run_interrupted(acts.restore_all, at)
        entries = Journal(run / "state", gpu.uuid).entries()
        if Knob.POWER_LIMIT not in entries:
            assert gpu.power_limit_w() == gpu.power_limit_constraints().default_w, f"opcode {at}: entry gone first"
        if Knob.SM_CLOCKS not in entries:
            assert gpu.locked_sm_clocks_mhz() is None, f"opcode {at}: clock entry gone first"
        assert acts.restore_all() == []
        assert gpu.is_default() and acts.unrestored_count() == 0, f"opcode {at}: not restored"
        acts.close()
    assert at > 100
