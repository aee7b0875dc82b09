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

from greentrain.actuators import FileBackedGPU
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
    assert "max_power_limit_w: must be a number > 0" in result.stderr and "Traceback" not in result.stderr
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
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "all GPU settings restored" in err
        assert gpu.is_default() and not sock.exists()
        client.close()
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)
