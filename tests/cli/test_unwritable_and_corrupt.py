"""Unwritable output folders fail before step 1; a damaged checkpoint falls back to the newest good one.

Root ignores permission bits, so the read-only case uses ``chmod`` only for an
unprivileged user; the "folder under a regular file" case cannot be written by
anyone and runs everywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from greentrain.cli import main

pytestmark = pytest.mark.timeout(240)


def _readonly_folder(tmp_path: Path) -> Path:
    if os.geteuid() == 0:
        pytest.skip("running as root: permission bits do not stop root (the regular-file case covers it)")
    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


@pytest.fixture(params=["under-a-regular-file", "read-only"])
def unwritable(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "read-only":
        folder = _readonly_folder(tmp_path)
        yield folder
        folder.chmod(0o755)
    else:
        blocker = tmp_path / "a-file"
        blocker.write_text("not a folder")
        yield blocker / "out"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code or 0, captured.out, captured.err


@pytest.mark.parametrize("flag", ["--checkpoint-dir", "--metrics-jsonl"])
def test_train_fails_before_step_1(flag: str, unwritable: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = unwritable / "m.jsonl" if flag == "--metrics-jsonl" else unwritable
    code, out, err = _cli(capsys, "train", "--steps", "2", flag, str(target))
    assert code == 2 and "Traceback" not in err, err
    assert err.count("greentrain: error:") == 1 and flag in err, err
    assert "step " not in out and "training on" not in out, "failed before any work"


def test_demo_out_fails_before_anything_runs(unwritable: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "demo", "--out", str(unwritable), "--no-progress")
    assert code == 2 and "Traceback" not in err, err
    assert err.count("greentrain: error:") == 1 and "--out" in err, err
    assert "greentrain demo" not in out


def test_run_jsonl_fails_before_the_command_starts(unwritable: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran"
    code, _out, err = _cli(capsys, "run", "--policy", "run-now", "--jsonl", str(unwritable / "run.jsonl"),
                           "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert code == 2 and "Traceback" not in err and "--jsonl" in err, err
    assert not marker.exists(), "the command must not start"


def _train(folder: Path, steps: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "greentrain", "train", "--steps", str(steps),
                           "--checkpoint-dir", str(folder), "--checkpoint-interval", "2", "--device", "cpu"],
                          capture_output=True, text=True, timeout=200, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_damaged_checkpoint_falls_back_to_the_newest_good_one(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    first = _train(folder, 4)
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["step-2", "step-4"]
    shard = next((folder / "step-4").glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[:1000])  # a partial write: .metadata present, data cut short

    second = _train(folder, 6)
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr, second.stderr
    damaged = [line for line in second.stderr.splitlines() if "is damaged" in line]
    assert len(damaged) == 1 and "step-4" in damaged[0], second.stderr
    steps = [int(line.split()[1]) for line in second.stdout.splitlines() if line.startswith("step ")]
    assert steps == [3, 4, 5, 6], "resumed after step 2, the newest complete checkpoint"
    assert (folder / "step-4.corrupt").is_dir(), "kept for inspection, out of resume and pruning"

    # Nothing good left: one line, exit 2, never a silent restart over the user's data.
    for metadata in folder.glob("step-*/.metadata"):
        metadata.write_bytes(b"garbage")
    third = _train(folder, 8)
    assert third.returncode == 2 and "Traceback" not in third.stderr, third.stderr
    assert third.stderr.strip().splitlines()[-1].startswith("greentrain: error: --checkpoint-dir"), third.stderr
