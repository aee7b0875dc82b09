"""greentrain run's supervisor on real child processes: delay, suspend (SIGSTOP/SIGCONT), checkpoint + relaunch."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import ThresholdPolicy, TraceSignals, hourly  # noqa: E402

from greentrain.clock import ReplayClock
from greentrain.engine import Collaborators, DeadlineGuard, Progress
from greentrain.engine import Engine
from greentrain.events import EventLog, read_events
from greentrain.job.process import ChildProcess
from greentrain.job.supervisor import Supervisor
from tests.gt_commands import CHECKPOINTING_WORKER

T0 = datetime(2022, 5, 1, 0, tzinfo=UTC)
SPEEDUP = 3600.0  # one trace hour per real second



def make(tmp_path: Path, values: list[float], work_h: float, deadline_h: float):
    clock = ReplayClock(T0, speedup=SPEEDUP)
    signals = TraceSignals(hourly(T0, values), clock)
    log = EventLog(tmp_path / "run.jsonl")
    engine = Engine(ThresholdPolicy(200),
                    Collaborators(clock=clock, signals=signals, event_log=log),
                    progress=Progress(work_total_s=work_h * 3600, step_time_s=0.05 * SPEEDUP),
                    deadline=DeadlineGuard(T0 + timedelta(hours=deadline_h), simulated=True),
                    decide_interval_s=120,
                    countdown=False)
    script = tmp_path / "worker.py"
    script.write_text(CHECKPOINTING_WORKER)
    return clock, engine, log, script


def rows(path: Path) -> list[tuple[int, float, str]]:
    return [(int(a), float(b), c) for a, b, c in (line.split() for line in path.read_text().splitlines())]


@pytest.mark.timeout(60)
def test_suspend_stops_the_process_group_through_the_dirty_hour(tmp_path: Path) -> None:
    clock, engine, log, script = make(tmp_path, [100, 900, 100, 100, 100, 100], work_h=1.6, deadline_h=6)
    out = tmp_path / "out.txt"
    child = ChildProcess([sys.executable, str(script), str(out), str(tmp_path / "state"), "120", "0.01"],
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    status = Supervisor(engine, child, pause_mode="suspend", poll_s=0.05).run(engine.begin())
    engine.close()
    log.close()
    assert status == 7, "the command's exit status passes through"
    got = rows(out)
    assert [r[0] for r in got] == list(range(120))
    gaps = [b[1] - a[1] for a, b in zip(got, got[1:], strict=False)]
    assert max(gaps) > 0.5, "the command was stopped while the grid was dirty"
    assert child.launches == 1 and not child.suspended
    events = read_events(tmp_path / "run.jsonl")
    assert [e["state"] for e in events if e["event"] == "state"] == ["running", "paused", "running"]
    pause = next(e for e in events if e["event"] == "action" and e["action"] == "pause")
    assert pause["until"].startswith("2022-05-01T02:00")


@pytest.mark.timeout(60)
def test_checkpoint_mode_signals_the_command_and_relaunches_it(tmp_path: Path) -> None:
    clock, engine, log, script = make(tmp_path, [100, 900, 100, 100, 100, 100], work_h=1.6, deadline_h=6)
    out = tmp_path / "out.txt"
    child = ChildProcess([sys.executable, str(script), str(out), str(tmp_path / "state"), "120", "0.01"],
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    status = Supervisor(engine, child, pause_mode="checkpoint", checkpoint_signal=signal.SIGUSR1,
                        poll_s=0.05, checkpoint_timeout_s=20).run(engine.begin())
    engine.close()
    log.close()
    assert status == 7
    got = rows(out)
    assert [r[0] for r in got] == list(range(120)), "no step lost or repeated across the relaunch"
    assert child.launches == 2
    assert {r[2] for r in got} == {"0", "1"}
    first_relaunched = next(r for r in got if r[2] == "1")
    assert clock.now() > T0 + timedelta(hours=2)
    assert first_relaunched[0] > 0


@pytest.mark.timeout(60)
def test_delayed_start_launches_at_the_clean_hour(tmp_path: Path) -> None:
    clock, engine, log, script = make(tmp_path, [900, 100, 100, 100], work_h=0.2, deadline_h=3)
    out = tmp_path / "out.txt"
    child = ChildProcess([sys.executable, str(script), str(out), str(tmp_path / "state"), "5", "0.01"])
    status = Supervisor(engine, child, pause_mode="suspend", poll_s=0.05).run(engine.begin())
    engine.close()
    log.close()
    assert status == 7 and [r[0] for r in rows(out)] == list(range(5))
    events = read_events(tmp_path / "run.jsonl")
    assert events[0]["event"] == "carbon"
    delay = next(e for e in events if e["event"] == "action")
    assert delay["action"] == "delay_start" and delay["until"].startswith("2022-05-01T01:00")


@pytest.mark.timeout(30)
def test_a_crash_after_the_checkpoint_signal_is_passed_through_not_relaunched(tmp_path: Path) -> None:
    clock, engine, log, _script = make(tmp_path, [100, 900, 100, 100], work_h=1.5, deadline_h=4)
    crash = tmp_path / "crash.py"
    crash.write_text("import os, signal, sys, time\n"
                     "signal.signal(signal.SIGUSR1, lambda *a: sys.exit(5))\n"
                     "open(os.environ['GREENTRAIN_CHECKPOINT_READY'], 'w').close()\n"
                     "time.sleep(30)\n")
    child = ChildProcess([sys.executable, str(crash)])
    status = Supervisor(engine, child, pause_mode="checkpoint", poll_s=0.05).run(engine.begin())
    engine.close()
    log.close()
    assert status == 5 and child.launches == 1


DRIVER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime, timedelta
    sys.path.insert(0, {engine_dir!r})
    from gt_engine_doubles import ThresholdPolicy, TraceSignals, hourly
    from greentrain.clock import ReplayClock
    from greentrain.engine import Collaborators, DeadlineGuard, Engine, Progress
    from greentrain.job.process import ChildProcess
    from greentrain.job.supervisor import Supervisor

    t0 = datetime(2022, 5, 1, tzinfo=UTC)
    clock = ReplayClock(t0, speedup=60.0)  # the dirty hour lasts a minute: long enough to be killed in
    signals = TraceSignals(hourly(t0 - timedelta(minutes=59), [100, 900, 100, 100]), clock)
    engine = Engine(ThresholdPolicy(200), Collaborators(clock=clock, signals=signals),
                    progress=Progress(work_total_s=3600, step_time_s=3),
                    deadline=DeadlineGuard(t0 + timedelta(hours=4), simulated=True), decide_interval_s=1,
                    countdown=False)
    child = ChildProcess([sys.executable, "-c",
                          "import os, time; open({pidfile!r}, 'w').write(str(os.getpid())); time.sleep(120)"])
    status = Supervisor(engine, child, pause_mode="suspend", poll_s=0.05).run(engine.begin())
    print("status", status, flush=True)
    sys.exit(status)
    """
)


@pytest.mark.timeout(60)
def test_sigterm_during_a_suspend_continues_and_ends_the_command(tmp_path: Path) -> None:
    import subprocess
    import time

    pidfile = tmp_path / "child.pid"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(engine_dir=str(Path(__file__).parent), pidfile=str(pidfile)))
    proc = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 40
        child_pid = None
        while time.monotonic() < deadline:  # wait until the command is suspended (state T in /proc)
            if child_pid is None and pidfile.exists() and pidfile.read_text():
                child_pid = int(pidfile.read_text())
            if child_pid is not None and _proc_state(child_pid) == "T":
                break
            time.sleep(0.05)
        assert child_pid is not None and _proc_state(child_pid) == "T", "the command was suspended"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert _proc_state(child_pid) in (None, "Z"), "no stopped or running command left behind"


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]
