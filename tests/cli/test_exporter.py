"""``greentrain exporter`` as a real process: scrape it, lint it, stop it by pid."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _start(*args: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    handle = log.open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "greentrain", "exporter", *args], stdout=handle,
                            stderr=subprocess.STDOUT, env=ENV)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = re.search(r"serving node metrics on (\S+)", log.read_text())
        if match:
            return proc, match[1]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"exporter did not start: {log.read_text()}")


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
        raise


def test_node_exporter_serves_every_gpu_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    proc, url = _start("--metrics-port", "0", "--interval-s", "0.2", "--fake-gpu", "a40", "--fake-gpu", "v100",
                       log=tmp_path / "exporter.log")
    try:
        assert url.startswith("http://127.0.0.1:")
        text = ""
        for _ in range(50):  # first samples after one interval
            text = urllib.request.urlopen(url, timeout=5).read().decode()
            if text.count("greentrain_gpu_power_watts{") == 2:
                break
            time.sleep(0.1)
        assert re.search(r'greentrain_gpu_power_watts\{UUID="GPU-[0-9a-f-]+",gpu="0"\} 2\d\d\.', text), text
        assert 'gpu="1"' in text
        assert 'greentrain_cpu_energy_joules_total{package="package-0",source="measured"}' in text
        assert "job=" not in text  # node mode: no job series
        promtool = shutil.which("promtool") or "/usr/bin/promtool"
        if Path(promtool).exists():
            done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                                  timeout=30)
            assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr
    finally:
        code = _stop(proc)
    assert code == 0, (tmp_path / "exporter.log").read_text()


def test_public_address_without_flag_is_one_line_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "greentrain", "exporter", "--metrics-addr", "0.0.0.0",
                           "--metrics-port", "0", "--fake-gpu", "a40"], capture_output=True, text=True, timeout=60,
                          env=ENV)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--metrics-allow-public" in lines[0] and "Traceback" not in done.stderr


def test_public_address_with_flag_warns(tmp_path: Path) -> None:
    proc, _url = _start("--metrics-addr", "0.0.0.0", "--metrics-allow-public", "--metrics-port", "0",
                       "--fake-gpu", "a40", log=tmp_path / "exporter.log")
    try:
        assert "reachable from the network" in (tmp_path / "exporter.log").read_text()
    finally:
        assert _stop(proc) == 0


def test_bad_fake_gpu_model_is_a_clear_error() -> None:
    done = subprocess.run([sys.executable, "-m", "greentrain", "exporter", "--metrics-port", "0",
                           "--fake-gpu", "h100"], capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 2 and "h100" in done.stderr and "Traceback" not in done.stderr
