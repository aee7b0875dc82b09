"""``greentrain demo --json`` end to end on CPU: one JSON object on stdout whose headline is net.

The demo trains on the CPU here; it must attribute only what its training uses (no GPU), report the
net figure (run-now minus everything it emitted, waiting included) beside the gross one, and on its
default day save net.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ranks import free_port


@pytest.mark.timeout(150)
def test_demo_json_reports_a_positive_net_saving_on_cpu(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "greentrain", "demo", "--out", str(tmp_path / "demo"), "--speedup", "2500",
           "--metrics-port", str(free_port()), "--no-progress", "--no-report", "--reserve-hours", "6", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=140)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)  # the whole of stdout is the one object; messages went to stderr
    assert "greentrain demo" in done.stderr
    for key in ("emissions_g", "run_now_emissions_g", "emissions_avoided_net_g", "emissions_avoided_gross_g",
                "waiting_energy_j", "deadline_met"):
        assert key in summary, key
    assert summary["deadline_met"] is True, (summary, done.stderr)
    assert summary["emissions_avoided_net_g"] > 0, (summary, done.stderr)
    assert summary["emissions_avoided_net_g"] == pytest.approx(summary["run_now_emissions_g"] - summary["emissions_g"])
    # Net = gross minus what waiting emitted.
    assert summary["emissions_avoided_net_g"] == pytest.approx(
        summary["emissions_avoided_gross_g"] - summary["waiting_emissions_g"], abs=1e-12)
    assert all(not device.startswith("gpu") for device in summary["energy_sources"]), summary["energy_sources"]
    assert summary["steps_done"] == summary["steps_total"]
