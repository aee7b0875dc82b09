"""`greentrain monitor`: subprocess runs on the bare path, exit status pass-through, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import greentrain.device.nvml as nvml_module
from greentrain.cli import main
from greentrain.events import read_events
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

pytestmark = pytest.mark.timeout(60)


def bare_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "GREENTRAIN_RAPL_ROOT": str(tmp_path / "no-powercap"),
            "OMP_NUM_THREADS": "1"}  # fmt: skip


def greentrain(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "greentrain", "monitor", *args], env=bare_env(tmp_path),
                          capture_output=True, text=True, timeout=50)  # fmt: skip


def test_command_runs_under_the_monitor_and_its_exit_status_passes_through(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    child = "import sys; print('child says hi'); sys.exit(7)"
    run = greentrain(tmp_path, "--interval-s", "0.05", "--jsonl", str(log), "--json", "--", sys.executable, "-c", child)
    assert run.returncode == 7, run.stderr
    lines = run.stdout.strip().splitlines()
    assert lines[0] == "child says hi"
    report = json.loads(lines[-1])
    assert report["exit_code"] == 7 and report["command"][0] == sys.executable
    (device,) = report["devices"]
    assert device["device"] == "cpu-estimate" and device["source"] == "estimated" and report["source"] == "estimated"
    assert device["energy_j"] > 0 and report["total_energy_j"] == pytest.approx(device["energy_j"])
    events = read_events(log)
    assert {e["event"] for e in events} == {"sample", "summary"}
    assert events[-1]["energy_j"] == pytest.approx(report["total_energy_j"])


def test_duration_mode_prints_a_table(tmp_path: Path) -> None:
    run = greentrain(tmp_path, "--duration-s", "0.2")
    assert run.returncode == 0, run.stderr
    assert "cpu-estimate" in run.stdout and "estimated" in run.stdout and "total" in run.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval-s", "0", "--duration-s", "1"], "--interval-s: must be a finite number of seconds > 0"),
        (["--interval-s", "fast"], "--interval-s: 'fast' is not a number"),
        (["--duration-s", "-3"], "--duration-s: must be a finite number of seconds > 0"),
        (["--", "definitely-not-a-command-xyz"], "CMD: command 'definitely-not-a-command-xyz' not found"),
        (["--gpu", "3", "--duration-s", "0.1"], "--gpu 3: is not a GPU visible to this process"),
        (["--metrics-port", "http", "--duration-s", "0.1"], "--metrics-port: must be a port number 0..65535, got 'http'"),
        (["--duration-s", "1", "--", "true"], "--duration-s: give either a command"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("GREENTRAIN_RAPL_ROOT", str(tmp_path / "none"))
    with pytest.raises(SystemExit) as info:
        main(["monitor", *args])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("greentrain: error: ") and message in err


def test_unwritable_jsonl_is_one_line_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = greentrain(tmp_path, "--jsonl", str(blocker / "run.jsonl"), "--duration-s", "0.1")
    assert run.returncode == 2
    assert run.stderr.strip().startswith(f"greentrain: error: --jsonl {blocker / 'run.jsonl'}: cannot write")
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_gpu_selection_and_lost_gpu_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNVML([FakeNVMLDevice("a40"), FakeNVMLDevice("v100")])
    fake.inject_error("nvmlDeviceGetTotalEnergyConsumption", fake.NVML_ERROR_GPU_IS_LOST, index=1)
    monkeypatch.setattr(nvml_module, "load_pynvml", lambda: fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("GREENTRAIN_RAPL_ROOT", str(tmp_path / "none"))
    main(["monitor", "--gpu", "0", "--gpu", fake.gpus[1].uuid[:12], "--duration-s", "0.05", "--json"])
    report = json.loads(capsys.readouterr().out)
    gpu0, gpu1, cpu = report["devices"]
    assert (gpu0["device"], gpu0["source"], gpu0["failed"]) == ("gpu0", "measured", False)
    assert gpu0["energy_j"] > 0 and gpu0["model"] == "NVIDIA A40"
    assert gpu1["failed"] and "GPU is lost" in gpu1["error"]
    assert cpu["device"] == "cpu-estimate"
    assert any("gpu1 failed" in n for n in report["notes"])


def test_until_ctrl_c_then_report(tmp_path: Path) -> None:
    import signal
    import time

    log = tmp_path / "run.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "greentrain", "monitor", "--interval-s", "0.02", "--jsonl", str(log), "--json"],
        env=bare_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 40
        while not (log.exists() and '"sample"' in log.read_text()):  # wait until it is measuring
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["duration_s"] > 0 and report["devices"][0]["energy_j"] > 0 and "exit_code" not in report
