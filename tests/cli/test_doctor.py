"""`greentrain doctor`: the nothing-measurable path as a subprocess, and a machine with fakes in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import greentrain.device.nvml as nvml_module
from greentrain.cli import main
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

pytestmark = pytest.mark.timeout(60)


def bare_env(tmp_path: Path) -> dict[str, str]:
    """No GPU visible and no RAPL tree, whatever machine runs the test."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "GREENTRAIN_RAPL_ROOT": str(tmp_path / "no-powercap"),
            "OMP_NUM_THREADS": "1"}  # fmt: skip


def test_nothing_measurable_exits_0_and_says_so(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "greentrain", "doctor", "--json"],
        env=bare_env(tmp_path), capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["gpus"] == [] and report["rapl"] == [] and report["measurable"] == []
    assert report["summary"].startswith("nothing measurable")
    assert report["estimate_used_for_cpu"] is True and report["cpu_estimate"]["tdp_w"] > 0
    assert report["versions"]["codecarbon"] == "3.3.2" and report["versions"]["greentrain"]
    assert any("CUDA_VISIBLE_DEVICES is set but empty" in n for n in report["notes"])
    human = subprocess.run(
        [sys.executable, "-m", "greentrain", "doctor"],
        env=bare_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert human.returncode == 0 and "nothing measurable" in human.stdout and "Traceback" not in human.stderr


def test_gpus_and_rapl_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    for name, value in (("name", "package-0"), ("energy_uj", "5"), ("max_energy_range_uj", "1000000")):
        (zone / name).write_text(value + "\n")
    fake = FakeNVML([FakeNVMLDevice("a40"), FakeNVMLDevice("v100", energy_counter=False, privileged=False)])
    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: fake)
    monkeypatch.setenv("GREENTRAIN_RAPL_ROOT", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    a40, v100 = report["gpus"]
    assert (a40["name"], a40["architecture"], a40["energy_source"]) == ("NVIDIA A40", "ampere", "measured")
    assert a40["power_limit_permitted"] is True and a40["power_limit_range_w"] == [100.0, 300.0]
    assert v100["energy_source"] == "integrated" and v100["power_limit_permitted"] is False
    assert v100["clock_control_permitted"] is False
    assert report["rapl"] == [{"name": "package-0", "path": str(zone), "readable": True, "status": "ok"}]
    assert report["estimate_used_for_cpu"] is False
    assert report["versions"]["nvidia-driver"] == "550.54.15"
    assert report["summary"] == "measurable: GPU 0 (measured), GPU 1 (integrated), RAPL package-0"
    assert fake.initialised == 0  # NVML released
    monkeypatch.setenv("COLUMNS", "200")  # one table row per GPU
    main(["doctor"])
    out = capsys.readouterr().out
    assert "NVIDIA A40" in out and "package-0" in out and "measurable: GPU 0" in out


def test_mig_slice_in_cuda_visible_devices_is_diagnosed_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNVML([FakeNVMLDevice("a40", mig=True), FakeNVMLDevice("a40")])
    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: fake)
    monkeypatch.setenv("GREENTRAIN_RAPL_ROOT", str(tmp_path / "none"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-0c4b2d9e-1111-2222-3333-444455556666")
    main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert "is a MIG slice" in report["notes"][0] and "per physical GPU" in report["notes"][0]
    assert [g["index"] for g in report["gpus"]] == [1]  # the MIG-mode GPU itself is skipped with a note
    assert any("GPU 0" in n and "MIG mode" in n for n in report["notes"])
