"""`greentrain daemon` as a user runs it: config errors are one line + exit 2; SIGTERM restores."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from greentrain.testing import FileBackedGPU
from greentrain.daemon.client import DaemonClient

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "greentrain", "daemon", *args], capture_output=True, text=True,
                          env=ENV, timeout=60)


@pytest.mark.timeout(60)
def test_bad_config_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "d.toml"
    bad.write_text('[limits]\nmax_power_limit_w = "lots"\n')
    result = _cli("--config", str(bad), "--check")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "limits.max_power_limit_w: expected float | None, got str 'lots'" in result.stderr and "Traceback" not in result.stderr
    missing = _cli("--config", str(tmp_path / "nope.toml"), "--check")
    assert missing.returncode == 2 and "cannot read daemon config" in missing.stderr


@pytest.mark.timeout(60)
def test_check_prints_effective_config(tmp_path: Path) -> None:
    good = tmp_path / "d.toml"
    good.write_text('[daemon]\nsocket = "/tmp/x.sock"\ngroup = "nogroup"\n')
    result = _cli("--config", str(good), "--check", "--state-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "socket=/tmp/x.sock group=nogroup" in result.stdout


@pytest.mark.timeout(60)
def test_serves_then_restores_on_sigterm(tmp_path: Path) -> None:
    sockdir = Path(tempfile.mkdtemp(prefix="gt-cli-"))
    try:
        sock = sockdir / "d.sock"
        proc = subprocess.Popen(
            [sys.executable, "-m", "greentrain", "daemon", "--socket", str(sock), "--state-dir", str(tmp_path),
             "--fake-gpus", "a40:1"],
            stderr=subprocess.PIPE, text=True, env=ENV,
        )
        assert "serving on" in proc.stderr.readline()
        gpu = FileBackedGPU(tmp_path / "fake-gpu0.json", "a40")
        client = DaemonClient(sock, job="cli-test")
        client.set_power_limit_w(gpu.uuid, 150)
        assert gpu.power_limit_w() == 150
        status = _cli("--socket", str(sock), "--status")
        assert status.returncode == 0, status.stderr
        assert "cli-test" in status.stdout and str(os.getpid()) in status.stdout and "150" in status.stdout
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "all GPU settings restored" in err
        assert gpu.is_default() and not sock.exists()
        client.close()
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)


@pytest.mark.timeout(60)
def test_restore_only_undoes_what_a_dead_job_left(tmp_path: Path) -> None:
    from greentrain.actuators import KnobController

    gpu = FileBackedGPU(tmp_path / "fake-gpu0.json", "a40")
    killed = KnobController(gpu, tmp_path)
    killed.set_power_limit_w(125)
    killed.lock.release()  # what SIGKILL does to a job: the lock goes, the journal stays
    result = _cli("--state-dir", str(tmp_path), "--fake-gpus", "a40:1", "--restore-only")
    assert result.returncode == 0, result.stderr
    assert "restored 1 setting(s)" in result.stdout and gpu.is_default()
    status = _cli("--socket", str(tmp_path / "none.sock"), "--status")
    assert status.returncode == 2 and "start it with `sudo greentrain daemon`" in status.stderr
