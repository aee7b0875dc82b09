"""Restore on every exit path, with real child processes and a file-backed GPU."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from greentrain.actuators import ActuatorSet, Journal
from greentrain.testing import FileBackedGPU

CHILD = Path(__file__).with_name("child_actuate.py")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _start(tmp_path: Path, mode: str, seed: int = 0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(tmp_path / "state"), str(tmp_path / "gpu.json"), mode, str(seed)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"child did not start: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}"


def _gpu(tmp_path: Path) -> FileBackedGPU:
    return FileBackedGPU(tmp_path / "gpu.json", "a40")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("mode", "send", "expect_rc"),
    [
        ("normal", None, 0),
        ("exception", None, 1),
        ("atexit", None, 0),
        ("sigint", signal.SIGINT, -signal.SIGINT),  # KeyboardInterrupt: Python's own handler ran after ours
        ("sigterm", signal.SIGTERM, -signal.SIGTERM),  # default action re-delivered after restoring
        ("chained-sigterm", signal.SIGTERM, 7),  # the host program's handler still runs
    ],
)
def test_settings_restored_on_exit_path(tmp_path: Path, mode: str, send: int | None, expect_rc: int) -> None:
    proc = _start(tmp_path, mode)
    _wait_ready(proc)
    gpu = _gpu(tmp_path)
    assert not gpu.is_default(), "child should have changed the GPU"
    proc.stdin.write("go\n")
    proc.stdin.flush()
    if send is not None:
        time.sleep(0.2)  # let the child reach its wait; an earlier signal is handled the same way
        proc.send_signal(send)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == expect_rc, err
    if mode == "chained-sigterm":
        assert "host-handler" in out
    if mode == "sigint":
        assert "KeyboardInterrupt" in err
    assert gpu.is_default(), f"{mode}: settings leaked: {gpu.settings()}"
    assert Journal(tmp_path / "state", gpu.uuid).entries() == {}


@pytest.mark.timeout(90)
def test_sigkill_at_random_points_then_restart_leaks_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    iterations = 30
    killed_while_changed = 0
    for i in range(iterations):
        proc = _start(tmp_path, "sigkill-loop", seed=i)
        _wait_ready(proc)
        time.sleep(rng.uniform(0.0, 0.05))  # a random kill point inside the apply/restore loop
        proc.kill()
        proc.wait(timeout=10)
        gpu = _gpu(tmp_path)
        with ActuatorSet([gpu], state_dir=tmp_path / "state", install_hooks=False) as acts:
            killed_while_changed += acts.recover() > 0
            assert gpu.is_default(), f"iteration {i}: leaked {gpu.settings()}"
            assert acts.unrestored_count() == 0
        assert Journal(tmp_path / "state", gpu.uuid).entries() == {}
    assert killed_while_changed >= iterations // 4, "kills should mostly land while settings were changed"


@pytest.mark.timeout(20)
def test_forked_child_signal_does_not_undo_parent_settings(tmp_path: Path) -> None:
    from greentrain.policies.base import Decision

    gpu = _gpu(tmp_path)
    acts = ActuatorSet([gpu], state_dir=tmp_path / "state")  # hooks installed, as in a real job
    try:
        acts.apply(Decision(power_limit_w=150.0))
        pid = os.fork()
        if pid == 0:  # e.g. a data-loader worker that gets SIGTERM
            os.kill(os.getpid(), signal.SIGTERM)
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
        assert gpu.power_limit_w() == 150.0, "the child restored the parent's setting"
    finally:
        acts.close()
    assert gpu.is_default()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # our handler removed again
