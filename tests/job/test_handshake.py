"""The checkpoint handshake (``greentrain.job.handshake``): checkpoint pauses only for a program that declared
it saves and exits 75; any other program is suspended, and one that dies of the signal is never relaunched."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from gt_engine_doubles import ThresholdPolicy, TraceSignals, hourly  # noqa: E402

from greentrain.clock import ReplayClock
from greentrain.engine import Collaborators, DeadlineGuard, Engine, Progress
from greentrain.events import EventLog, read_events
from greentrain.exitcodes import RESUME_EXIT_CODE
from greentrain.job.handshake import READY_ENV, SIGNAL_ENV, CheckpointHandshake, died_of, run_pause_mode
from greentrain.job.process import ChildProcess
from greentrain.job.supervisor import Supervisor
from tests.gt_commands import CHECKPOINTING_WORKER, HANDSHAKE_WORKER, SNAPSHOT_WORKER

T0 = datetime(2022, 5, 1, 0, tzinfo=UTC)
SPEEDUP = 3600.0  # one trace hour per real second
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def test_the_mode_is_decided_from_the_declaration() -> None:
    assert run_pause_mode("suspend", False) == ("suspend", None)
    assert run_pause_mode("suspend", True) == ("suspend", None)
    assert run_pause_mode("checkpoint", True) == ("checkpoint", None)
    mode, line = run_pause_mode("checkpoint", False)
    assert mode == "suspend" and line is not None and "pausing it by suspend instead" in line
    assert "\n" not in line and "greentrain.job.handshake.on_pause" in line
    assert run_pause_mode("auto", True) == ("auto", None)
    assert run_pause_mode("auto", False) == ("suspend", None)
    assert died_of(-signal.SIGUSR1, signal.SIGUSR1) and died_of(128 + signal.SIGUSR1, signal.SIGUSR1)
    assert not died_of(RESUME_EXIT_CODE, signal.SIGUSR1) and not died_of(0, signal.SIGUSR1)


def test_each_launch_declares_again(tmp_path: Path) -> None:
    handshake = CheckpointHandshake(signal.SIGUSR1, tmp_path)
    env = handshake.env(0)
    assert env[SIGNAL_ENV] == "SIGUSR1" and env["GREENTRAIN_RESTARTS"] == "0"
    assert not handshake.declared()
    Path(env[READY_ENV]).write_text("SIGUSR1")
    assert handshake.declared()
    assert handshake.env(1)["GREENTRAIN_RESTARTS"] == "1" and not handshake.declared()


def test_on_pause_outside_greentrain_run_installs_nothing(tmp_path: Path) -> None:
    script = ("import signal, sys\n"
              "from greentrain.job.handshake import on_pause\n"
              "p = on_pause(lambda: None)\n"
              "assert not p.active and signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL\n"
              "p.check()\n"
              "print('ok')\n")
    env = {k: v for k, v in ENV.items() if k not in (SIGNAL_ENV, READY_ENV)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_on_pause_saves_and_exits_75_from_the_handler(tmp_path: Path) -> None:
    ready, saved = tmp_path / "ready", tmp_path / "saved"
    script = ("import os, signal, time\n"
              "from greentrain.job.handshake import on_pause\n"
              f"on_pause(lambda: open({str(saved)!r}, 'w').write('step 3'))\n"
              "os.kill(os.getpid(), signal.SIGUSR2)\n"
              "time.sleep(10)\n")
    env = {**ENV, SIGNAL_ENV: "SIGUSR2", READY_ENV: str(ready)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == RESUME_EXIT_CODE, proc.stderr
    assert ready.read_text() == "saved" and saved.read_text() == "step 3", "declared, then confirmed the save"
    assert "Traceback" not in proc.stderr


# ---- under the supervisor, on real child processes -----------------------------------------------------


def _engine(tmp_path: Path, values: list[float], work_h: float, deadline_h: float) -> tuple[Engine, EventLog]:
    clock = ReplayClock(T0, speedup=SPEEDUP)
    log = EventLog(tmp_path / "run.jsonl")
    engine = Engine(ThresholdPolicy(200), Collaborators(clock=clock, signals=TraceSignals(hourly(T0, values), clock),
                                                        event_log=log),
                    progress=Progress(work_total_s=work_h * 3600, step_time_s=0.05 * SPEEDUP),
                    deadline=DeadlineGuard(T0 + timedelta(hours=deadline_h), simulated=True),
                    decide_interval_s=120, countdown=False)
    return engine, log


def _supervise(tmp_path: Path, worker: str, ticks: int = 120) -> tuple[int, ChildProcess, Supervisor, list[str]]:
    engine, log = _engine(tmp_path, [100, 900, 100, 100, 100, 100], work_h=1.6, deadline_h=6)
    script = tmp_path / "worker.py"
    script.write_text(worker)
    child = ChildProcess([sys.executable, str(script), str(tmp_path / "out.txt"), str(tmp_path / "state"),
                          str(ticks), "0.01"], env=ENV)
    supervisor = Supervisor(engine, child, pause_mode="checkpoint", checkpoint_signal=signal.SIGUSR1, poll_s=0.05,
                            checkpoint_timeout_s=20)
    status = supervisor.run(engine.begin())
    engine.close()
    log.close()
    rows = [line.split() for line in (tmp_path / "out.txt").read_text().splitlines()]
    return status, child, supervisor, [r[0] for r in rows]


@pytest.mark.timeout(60)
def test_a_program_without_the_handshake_is_suspended_not_killed(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="greentrain"):
        status, child, supervisor, ticks = _supervise(tmp_path, SNAPSHOT_WORKER)
    assert status == 7, "it ran to its own end"
    assert ticks == [str(i) for i in range(120)], "no step repeated or lost"
    assert child.launches == 1 and supervisor.pauses >= 1 and supervisor.lost_energy_j is None
    said = [r.getMessage() for r in caplog.records if "pausing it by suspend instead" in r.getMessage()]
    assert len(said) == 1, "said once"
    events = read_events(tmp_path / "run.jsonl")
    assert [e["state"] for e in events if e["event"] == "state"] == ["running", "paused", "running"]


@pytest.mark.timeout(60)
def test_a_program_using_the_helper_is_checkpointed_and_resumes(tmp_path: Path) -> None:
    status, child, supervisor, ticks = _supervise(tmp_path, HANDSHAKE_WORKER)
    assert status == 7
    assert ticks == [str(i) for i in range(120)], "no step lost or repeated across the relaunch"
    assert child.launches == 2 and supervisor.lost_energy_j is None
    restarts = [line.split()[2] for line in (tmp_path / "out.txt").read_text().splitlines()]
    assert restarts == sorted(restarts) and set(restarts) == {"0", "1"}


@pytest.mark.timeout(60)
def test_a_program_that_dies_of_the_signal_is_not_relaunched(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    # Declares, but its handler is not the one that runs: SIGUSR1's default action kills it.
    liar = SNAPSHOT_WORKER.replace("import os, sys, time",
                                   "import os, sys, time\nopen(os.environ['GREENTRAIN_CHECKPOINT_READY'], 'w').close()")
    with caplog.at_level(logging.WARNING, logger="greentrain"):
        status, child, supervisor, ticks = _supervise(tmp_path, liar)
    assert status == 128 + signal.SIGUSR1
    assert child.launches == 1, "never relaunched from scratch"
    assert ticks == [str(i) for i in range(len(ticks))] and len(ticks) < 120
    lost = [r.getMessage() for r in caplog.records if "died of SIGUSR1" in r.getMessage()]
    assert len(lost) == 1 and "not relaunched" in lost[0] and "lost" in lost[0]
    assert supervisor.lost_energy_j is not None


@pytest.mark.timeout(60)
def test_the_raw_protocol_without_the_helper_checkpoints(tmp_path: Path) -> None:
    status, child, _supervisor, ticks = _supervise(tmp_path, CHECKPOINTING_WORKER)
    assert status == 7 and child.launches == 2
    assert ticks == [str(i) for i in range(120)]


LAUNCHER = """
import subprocess, sys
# A launcher that does not handle the checkpoint signal (it dies of it) around a worker that does.
sys.exit(subprocess.call([sys.executable, *sys.argv[1:]]))
"""


@pytest.mark.timeout(60)
def test_a_launcher_that_dies_of_the_signal_around_a_worker_that_saved_is_relaunched(tmp_path: Path) -> None:
    engine, log = _engine(tmp_path, [100, 900, 100, 100, 100, 100], work_h=1.6, deadline_h=6)
    (tmp_path / "worker.py").write_text(HANDSHAKE_WORKER.replace("pause.check()", "pause.check(); time.sleep(0.2)"))
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    child = ChildProcess([sys.executable, str(tmp_path / "launcher.py"), str(tmp_path / "worker.py"),
                          str(tmp_path / "out.txt"), str(tmp_path / "state"), "60", "0.01"], env=ENV)
    supervisor = Supervisor(engine, child, pause_mode="checkpoint", checkpoint_signal=signal.SIGUSR1, poll_s=0.05,
                            checkpoint_timeout_s=20)
    status = supervisor.run(engine.begin())
    engine.close()
    log.close()
    ticks = [int(line.split()[0]) for line in (tmp_path / "out.txt").read_text().splitlines()]
    assert status == 7 and child.launches == 2, "the worker's confirmed save counts, not the launcher's death"
    assert ticks == list(range(60)) and supervisor.lost_energy_j is None
