"""Every job says one plan line at its start and one summary line at its end (``greentrain.job.announce``):
the policy, the carbon signal and what it is, the deadline and metrics URL; energy with its sources, emissions and
net avoided in one unit, the deadline's verdict. ``quiet`` turns both off; with no logging set up they reach
stderr."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from greentrain.clock import ReplayClock
from greentrain.session import Session
from greentrain.testing import FakeCPUDomain
from greentrain.units import format_masses_g

pytestmark = pytest.mark.timeout(120)

GB_TRACE = Path(__file__).resolve().parents[2] / "greentrain" / "data" / "carbon" / "GB_2022_hourly.csv"


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "greentrain.report"]


def _session(**settings: object) -> Session:
    from greentrain.device.discovery import DeviceSet

    clock = ReplayClock(datetime(2022, 3, 14, 12, tzinfo=UTC), speedup=60.0)
    return Session("run-now", clock=clock, devices=DeviceSet(gpus=[], cpus=[FakeCPUDomain("package-0")]),
                   steps_total=3, relaunch="none", progress=False, **settings)


def test_a_session_says_its_plan_and_summary(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="greentrain.report"):
        with _session(provider=f"csv:{GB_TRACE}", zone="GB", deadline="+2", metrics_port=0) as session:
            url = session.metrics.url
            for _ in range(3):
                time.sleep(0.02)
                session.step()
    plan, done = _said(caplog)
    assert plan.startswith("greentrain: plan: policy run-now, carbon GB from a replayed trace (GB_2022_hourly.csv)")
    assert re.search(r"deadline 2022-03-14 14:\d\d UTC \(simulated\), pauses by suspend", plan), plan
    assert plan.endswith(f"metrics at {url}")
    assert done.startswith("greentrain: done: 3/3 steps, energy ") and "(package-0: " in done
    assert re.search(r"deadline 2022-03-14 14:\d\d UTC \(simulated\) met$", done), done
    emitted = done.split("emissions ")[1].split(",")[0]
    avoided = done.split("net avoided ")[1].split(" (")[0]
    assert emitted.split()[-1] == avoided.split()[-1], "one unit in a summary"


def test_quiet_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="greentrain.report"):
        with _session(provider="static", zone="GB", quiet=True) as session:
            for _ in range(3):
                session.step()
    assert _said(caplog) == []


def test_without_logging_the_lines_reach_stderr() -> None:
    code = ("from greentrain import Session\n"
            "with Session('run-now', zone='FR', devices=False, steps_total=2, relaunch='none', progress=False) as s:\n"
            "    s.step(); s.step()\n")
    env = {"PATH": "", "ELECTRICITYMAPS_TOKEN": ""}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("greentrain: ")]
    assert lines[0].startswith("greentrain: plan: policy run-now, carbon FR from static annual averages")
    assert "a fallback: no live provider is configured" in lines[0]
    assert lines[-1] == ("greentrain: done: 2/2 steps, energy not measured, emissions unknown (no energy measured), "
                         "no deadline")


def test_masses_in_one_summary_share_one_unit() -> None:
    assert format_masses_g([0.02, 0.0001]) == ["20.00 mgCO2eq", "0.10 mgCO2eq"]
    assert format_masses_g([61.5, -12.0]) == ["61.5 gCO2eq", "-12.0 gCO2eq"]
    assert format_masses_g([1234.0, 0.0]) == ["1.23 kgCO2eq", "0 kgCO2eq"]
    assert format_masses_g([None, 0.5]) == ["unknown", "500 mgCO2eq"]
