"""Signals at random moments to a job with its own stop-flag handler leak no GPU setting.

The child installs a SIGINT/SIGTERM handler that only sets a flag (docs/power.md
says this is supported), then creates its ActuatorSet, whose hooks chain to it,
and changes settings in a tight loop, so most signals land inside ``apply()``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from killfuzz import run_rounds  # noqa: E402

from greentrain.actuators import ActuatorSet, Journal
from greentrain.policies.base import Decision
from greentrain.testing import FileBackedGPU


@pytest.mark.timeout(240)
def test_signals_to_a_job_with_its_own_handler_leak_nothing(tmp_path: Path) -> None:
    rounds = run_rounds(tmp_path, rounds=32, seed=20261123)
    signals = sum(r.signals_sent for r in rounds)
    assert signals >= 30
    assert [r.detail for r in rounds if r.hung] == []
    leaks = [r.detail for r in rounds if r.leaked]
    assert leaks == [], f"{len(leaks)} of {len(rounds)} children leaked: {leaks[:3]}"
    assert all(r.rc == 0 for r in rounds), [r.detail for r in rounds if r.rc != 0][:3]  # the handler ran, no exit
    assert all(r.restored_at_boundary for r in rounds), "restore must happen at the step boundary, not only at exit"
    assert all(r.held for r in rounds), "after a stop signal no new setting may be applied"
    assert sum(r.in_apply for r in rounds) >= len(rounds) // 3, "signals should mostly land inside apply()"


class _SignalMidChange(FileBackedGPU):
    """Sends this process a signal from inside ``set_power_limit_w``: the worst moment for a restore."""

    def __init__(self, *args: object, signum: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.signum = signum
        self.armed = False

    def set_power_limit_w(self, power_limit_w: float) -> None:
        if self.armed:
            self.armed = False
            os.kill(os.getpid(), self.signum)  # the handler runs at the next bytecode, i.e. inside this change
        super().set_power_limit_w(power_limit_w)


@pytest.mark.timeout(20)
def test_signal_mid_change_restores_after_the_change_completes(tmp_path: Path) -> None:
    seen: list[tuple[int, float]] = []
    gpu = _SignalMidChange(tmp_path / "gpu.json", "a40", signum=signal.SIGTERM)
    previous = signal.signal(signal.SIGTERM, lambda s, f: seen.append((s, gpu.power_limit_w())))
    try:
        with ActuatorSet([gpu], state_dir=tmp_path / "state") as acts:
            assert acts.apply(Decision(power_limit_w=200.0)) == ["power_limit"]
            gpu.armed = True
            # undone before it returns, so not reported as applied
            assert acts.apply(Decision(power_limit_w=125.0, sm_clocks_mhz=(600, 900))) == []
            # held back until the change completed and was restored: the host handler saw the default
            assert seen == [(signal.SIGTERM, 300.0)]
            assert acts.stop_requested
            assert gpu.is_default(), gpu.settings()
            assert Journal(tmp_path / "state", gpu.uuid).entries() == {}
            assert acts.apply(Decision(power_limit_w=150.0)) == []  # held: the job is stopping
            assert gpu.is_default()
        assert signal.getsignal(signal.SIGTERM) is not None
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.timeout(240)
def test_signals_with_default_handlers_restore_and_end_the_process(tmp_path: Path) -> None:
    rounds = run_rounds(tmp_path, rounds=12, seed=7, own_handler=False)
    assert [r.detail for r in rounds if r.hung] == []
    assert [r.detail for r in rounds if r.leaked] == []
    # died of the signal, as without greentrain: SIGTERM's default action, or an unhandled KeyboardInterrupt
    assert all(r.rc in (-signal.SIGTERM, -signal.SIGINT) for r in rounds), [r.detail for r in rounds][:3]


@pytest.mark.timeout(20)
def test_an_ignored_signal_stays_ignored_and_restores_nothing(tmp_path: Path) -> None:
    gpu = FileBackedGPU(tmp_path / "gpu.json", "a40")
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # e.g. under nohup
    try:
        with ActuatorSet([gpu], state_dir=tmp_path / "state") as acts:
            acts.apply(Decision(power_limit_w=150.0))
            os.kill(os.getpid(), signal.SIGHUP)
            acts.at_step_boundary()
            assert not acts.stop_requested and gpu.power_limit_w() == 150.0
            assert acts.apply(Decision(power_limit_w=175.0)) == ["power_limit"]
        assert gpu.is_default()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


_SECOND_SIGNAL_AT_EXIT = """
import atexit, os, signal, sys
from greentrain.actuators import ActuatorSet
from greentrain.policies.base import Decision
from greentrain.testing import FileBackedGPU
# An exit hook that sends SIGINT once SIGTERM has ended the job: os.kill handles it before returning, so a
# KeyboardInterrupt would be raised inside an exit hook, as a second Ctrl-C during exit can be.
atexit.register(os.kill, os.getpid(), signal.SIGINT)
gpu = FileBackedGPU(sys.argv[1], "a40")
with ActuatorSet([gpu], state_dir=sys.argv[2]) as acts:
    acts.apply(Decision(power_limit_w=150.0))
    os.kill(os.getpid(), signal.SIGTERM)
print("not reached")
"""


@pytest.mark.timeout(60)
def test_a_second_signal_of_another_kind_during_exit_still_dies_of_the_first(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _SECOND_SIGNAL_AT_EXIT, str(tmp_path / "gpu.json"),
                           str(tmp_path / "state")], capture_output=True, text=True, timeout=50)
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, proc.stderr[-600:])
    assert "KeyboardInterrupt" not in proc.stderr and "not reached" not in proc.stdout
    assert FileBackedGPU(tmp_path / "gpu.json", "a40").is_default()
