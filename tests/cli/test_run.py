"""`greentrain run`: bad input is one line + exit 2; output and exit status pass through."""

from __future__ import annotations

import sys

import pytest

from greentrain.cli import main

pytestmark = pytest.mark.timeout(60)

PY = sys.executable


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(["run", *args])
    return int(exc.value.code or 0)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--deadline", "2030-01-01T00:00", "--estimate-hours", "1"], "has no timezone"),
        (["--deadline", "2020-01-01T00:00Z", "--estimate-hours", "1"], "is in the past"),
        (["--deadline", "+1", "--estimate-hours", "5"], "--deadline-policy best-effort"),
        (["--deadline", "+3"], "--estimate-hours"),
        (["--deadline", "soon", "--estimate-hours", "1"], "is not ISO-8601"),
        (["--policy", "no-such-policy"], "unknown policy or preset 'no-such-policy'"),
        (["--policy", "/nonexistent/policy.toml"], "/nonexistent/policy.toml"),
        (["--checkpoint-signal", "SIGNOPE"], "--checkpoint-signal"),
        (["--interval-s", "0"], "--interval-s"),
        (["--estimate-hours", "-2"], "--estimate-hours"),
        (["--replay-start", "2022-01-01T00:00Z"], "--replay-speedup"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli([*args, "--no-measure", "--", PY, "-c", "raise SystemExit(9)"])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith(("Error", "greentrain: error"))]) == 1


def test_missing_or_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--no-measure"]) == 2
    assert "Missing argument 'COMMAND" in capsys.readouterr().err
    assert run_cli(["--no-measure", "--policy", "run-now", "--", "greentrain-no-such-cmd"]) == 2
    err = capsys.readouterr().err
    assert "'greentrain-no-such-cmd' not found" in err and "Traceback" not in err


def test_output_and_exit_status_pass_through(capfd: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["--policy", "run-now", "--no-measure", "--interval-s", "0.05", "--",
                    PY, "-c", "import sys; print('hello from child'); print('to stderr', file=sys.stderr); exit(4)"])
    out, err = capfd.readouterr()
    assert code == 4
    assert "hello from child" in out and "to stderr" in err


def test_killed_by_signal_is_128_plus_n() -> None:
    code = run_cli(["--policy", "run-now", "--no-measure", "--interval-s", "0.05", "--",
                    PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert code == 128 + 15


def test_best_effort_warns_and_runs_now(capfd: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["--deadline", "+1", "--estimate-hours", "5", "--deadline-policy", "best-effort",
                    "--no-measure", "--interval-s", "0.05", "--", PY, "-c", "print('ran')"])
    out, err = capfd.readouterr()
    assert code == 0 and "ran" in out
    assert "best-effort" in err
