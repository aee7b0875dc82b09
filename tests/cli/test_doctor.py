"""`greentrain doctor`: the nothing-measurable path as a subprocess, a machine with fakes in-process, and
the read-only rule: no NVML setter call unless --probe-write, which advisory mode refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import greentrain.device.inventory as inventory
import greentrain.device.nvml as nvml_module
from greentrain.cli import main
from greentrain.device.privilege import Privilege
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


SETTERS = ("nvmlDeviceSetPowerManagementLimit", "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks")


def setter_calls(fake: FakeNVML) -> list[tuple[str, int | None, tuple]]:
    return [c for c in fake.calls if c[0] in SETTERS or "Set" in c[0] or "Reset" in c[0]]


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeNVML, Path]:
    """An A40 this process may control and a V100 whose driver refuses writes, plus one RAPL zone."""
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    for name, value in (("name", "package-0"), ("energy_uj", "5"), ("max_energy_range_uj", "1000000")):
        (zone / name).write_text(value + "\n")
    fake = FakeNVML([FakeNVMLDevice("a40"), FakeNVMLDevice("v100", energy_counter=False, privileged=False)])
    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: fake)
    monkeypatch.setenv("GREENTRAIN_RAPL_ROOT", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("GREENTRAIN_ADVISE_ONLY", raising=False)
    monkeypatch.setenv("GREENTRAIN_DAEMON_SOCKET", str(tmp_path / "no-daemon.sock"))
    return fake, zone


def test_gpus_and_rapl_are_reported_without_any_write(
    two_gpus: tuple[FakeNVML, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, zone = two_gpus
    monkeypatch.setattr(inventory, "local_privilege", lambda: Privilege(True, "euid 0 (root)"))
    main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert setter_calls(fake) == []  # read-only: not even a same-value write
    a40, v100 = report["gpus"]
    assert (a40["name"], a40["architecture"], a40["energy_source"]) == ("NVIDIA A40", "ampere", "measured")
    assert a40["power_limit_permitted"] is True and a40["power_limit_range_w"] == [100.0, 300.0]
    # the V100's driver would refuse, but only a write can tell: root says permitted, marked unverified
    assert v100["energy_source"] == "integrated" and v100["power_limit_permitted"] is True
    assert (v100["permitted_basis"], v100["permitted_verified"]) == ("euid 0 (root)", False)
    assert report["hardware_writes"] == "none"
    assert report["rapl"] == [{"name": "package-0", "path": str(zone), "readable": True, "status": "ok"}]
    assert report["estimate_used_for_cpu"] is False
    assert report["versions"]["nvidia-driver"] == "550.54.15"
    assert report["summary"] == "measurable: GPU 0 (measured), GPU 1 (integrated), RAPL package-0"
    assert fake.initialised == 0  # NVML released
    monkeypatch.setenv("COLUMNS", "200")  # one table row per GPU
    main(["doctor"])
    out = capsys.readouterr().out
    assert "NVIDIA A40" in out and "package-0" in out and "measurable: GPU 0" in out
    assert "yes, unverified" in out and "hardware writes: none" in out
    assert setter_calls(fake) == []


def test_unprivileged_user_is_not_permitted_without_a_write(
    two_gpus: tuple[FakeNVML, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, _ = two_gpus
    monkeypatch.setattr(inventory, "local_privilege", lambda: Privilege(False, "euid 1000, no CAP_SYS_ADMIN"))
    main(["doctor", "--json"])
    gpus = json.loads(capsys.readouterr().out)["gpus"]
    assert [g["power_limit_permitted"] for g in gpus] == [False, False]
    assert [g["clock_control_permitted"] for g in gpus] == [False, False]
    assert {g["permitted_basis"] for g in gpus} == {"euid 1000, no CAP_SYS_ADMIN"}
    assert setter_calls(fake) == []


def test_probe_write_verifies_with_one_same_value_write_per_gpu(
    two_gpus: tuple[FakeNVML, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, _ = two_gpus
    monkeypatch.setattr(inventory, "local_privilege", lambda: Privilege(True, "euid 0 (root)"))
    limits_before = [g.power_limit_w() for g in fake.gpus]
    main(["doctor", "--json", "--probe-write"])
    report = json.loads(capsys.readouterr().out)
    a40, v100 = report["gpus"]
    assert (a40["power_limit_permitted"], a40["permitted_verified"]) == (True, True)
    assert (v100["power_limit_permitted"], v100["permitted_verified"]) == (False, True)  # the driver refused
    writes = setter_calls(fake)
    assert [(name, index) for name, index, _ in writes] == [
        ("nvmlDeviceSetPowerManagementLimit", 0), ("nvmlDeviceSetPowerManagementLimit", 1)]
    assert [args[0] for _, _, args in writes] == [round(w * 1000) for w in limits_before]  # the same value
    assert [g.power_limit_w() for g in fake.gpus] == limits_before
    assert report["hardware_writes"].startswith("same-value power-limit write")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_probe_write_in_advisory_mode_is_a_one_line_error(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**bare_env(tmp_path), **({"GREENTRAIN_ADVISE_ONLY": "1"} if how == "env" else {})}
    argv = ["doctor", "--probe-write"] + (["--advise-only"] if how == "flag" else [])
    run = subprocess.run([sys.executable, "-m", "greentrain", *argv], env=env, capture_output=True, text=True,
                         timeout=50)
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "--probe-write" in lines[0] and "advisory mode" in lines[0], run.stderr
    assert ("--advise-only" if how == "flag" else "GREENTRAIN_ADVISE_ONLY=1") in lines[0]


def test_bad_advise_only_env_value_is_a_one_line_error(tmp_path: Path) -> None:
    env = {**bare_env(tmp_path), "GREENTRAIN_ADVISE_ONLY": "maybe"}
    run = subprocess.run([sys.executable, "-m", "greentrain", "doctor", "--probe-write"], env=env,
                         capture_output=True, text=True, timeout=50)
    assert run.returncode == 2 and "GREENTRAIN_ADVISE_ONLY='maybe'" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_daemon_that_manages_the_gpu_makes_it_permitted_unverified(
    two_gpus: tuple[FakeNVML, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, _ = two_gpus
    monkeypatch.setattr(inventory, "local_privilege", lambda: Privilege(False, "euid 1000, no CAP_SYS_ADMIN"))
    a40_uuid = fake.gpus[0].uuid
    monkeypatch.setattr(inventory, "daemon_gpus", lambda _socket: ({a40_uuid}, "/run/greentrain/daemon.sock"))
    main(["doctor", "--json"])
    a40, v100 = json.loads(capsys.readouterr().out)["gpus"]
    assert (a40["power_limit_permitted"], a40["permitted_verified"]) == (True, False)
    assert "greentrain daemon at /run/greentrain/daemon.sock" in a40["permitted_basis"]
    assert v100["power_limit_permitted"] is False
    assert setter_calls(fake) == []


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
