"""``--advise-only`` on every command that could actuate, and its refusals (one line, exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import greentrain.session as session_module
from greentrain.cli import main
from greentrain.cli.train import argv_for_ranks, build_config

pytestmark = pytest.mark.timeout(120)

TINY_TOML = """
[model]
dim = 32
n_layers = 2
n_heads = 4
max_seq_len = 64
[train]
steps = 2
global_batch = 4
seq_len = 16
device = "cpu"
[data]
max_bytes = 100000
"""


def test_train_flag_reaches_the_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GREENTRAIN_ADVISE_ONLY", raising=False)
    monkeypatch.setenv("GREENTRAIN_STATE_DIR", str(tmp_path / "state"))
    config = tmp_path / "job.toml"
    config.write_text(TINY_TOML)
    seen: list[str] = []

    class Recording(session_module.Session):
        def __enter__(self):
            seen.append(self.actuation)
            return super().__enter__()

    monkeypatch.setattr(session_module, "Session", Recording)
    main(["train", "--config", str(config), "--policy", "carbon-aware", "--advise-only"])
    assert seen == ["advise"]


def test_train_flag_travels_to_torchrun_ranks_and_config() -> None:
    flags = {"actuation": "advise", "steps": 3}
    assert "--advise-only" in argv_for_ranks("tiny", (), flags)
    assert build_config("tiny", flags, ()).greentrain.actuation == "advise"
    assert build_config("tiny", {}, ()).greentrain.actuation == "apply"


def test_bad_actuation_in_config_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["train", "--set", 'greentrain.actuation="maybe"'])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1
    assert "greentrain.actuation: 'maybe' is not 'apply' or 'advise'" in err  # JobOptions' wording


def test_run_flag_puts_the_command_in_advisory_mode(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GREENTRAIN_ADVISE_ONLY"}
    probe = "import os; print('advise-only=' + os.environ.get('GREENTRAIN_ADVISE_ONLY', 'unset'))"
    done = subprocess.run([sys.executable, "-m", "greentrain", "run", "--no-measure", "--advise-only", "--",
                           sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "advise-only=1" in done.stdout


@pytest.mark.parametrize("command", ["demo", "train", "run", "doctor"])
def test_help_shows_the_flag(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        main([command, "--help"])
    except SystemExit as e:
        assert e.code == 0
    assert "--advise-only" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [[], ["--restore-only"]])
def test_daemon_refuses_to_start_in_advisory_mode(tmp_path: Path, extra: list[str]) -> None:
    env = {**os.environ, "GREENTRAIN_ADVISE_ONLY": "1"}
    done = subprocess.run([sys.executable, "-m", "greentrain", "daemon", "--socket", str(tmp_path / "d.sock"),
                           "--state-dir", str(tmp_path / "state"), "--fake-gpus", "a40:1", *extra],
                          env=env, capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "advisory mode is on (GREENTRAIN_ADVISE_ONLY=1)" in lines[0]
    assert not (tmp_path / "d.sock").exists()
