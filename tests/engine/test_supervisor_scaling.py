"""``greentrain run`` carbon scaling on real child processes: the command is relaunched with --nproc changed,
and a count that fails at launch falls back to the one that worked."""

from __future__ import annotations

import os
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import TraceSignals, hourly  # noqa: E402

from greentrain.clock import ReplayClock
from greentrain.engine import Collaborators, DeadlineGuard, Engine, Progress
from greentrain.engine.scaler import Scaling
from greentrain.errors import ConfigError
from greentrain.events import EventLog, read_events
from greentrain.job.process import ChildProcess
from greentrain.job.replicas import CommandScaler, nproc_of, with_nproc
from greentrain.job.supervisor import Supervisor
from greentrain.policies import load_policy
from greentrain.policies.scaling_profile import parse_scaling_profile

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2022, 5, 1, 0, tzinfo=UTC)
SPEEDUP = 3600.0  # one trace hour per real second
PROFILE = parse_scaling_profile("replicas,throughput,power_w\n1,100,100\n2,200,200\n4,400,400\n", "p.csv")

# Ticks of work until N done; each tick's worth depends on --nproc (4 processes: 2 units, 2: 1 unit).
WORKER = textwrap.dedent(
    """
    import os, signal, sys, time
    out, state, n, fail_at = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    nproc = int(sys.argv[sys.argv.index("--nproc-per-node") + 1])
    if str(nproc) == fail_at:
        sys.exit(1)  # e.g. no devices for this many processes
    stop = False
    def on_usr1(signum, frame):
        global stop
        stop = True
    signal.signal(signal.SIGUSR1, on_usr1)
    done = float(open(state).read()) if os.path.exists(state) else 0.0
    while done < n:
        time.sleep(0.01)
        done += nproc / 2
        with open(out, "a") as f:
            f.write(f"{nproc}\\n")
        if stop:
            with open(state + ".tmp", "w") as f:
                f.write(str(done))
            os.replace(state + ".tmp", state)
            sys.exit(0)
    sys.exit(0)
    """
)


def test_nproc_flags_are_found_and_changed() -> None:
    assert nproc_of(["torchrun", "--nproc-per-node", "4", "train.py"]) == 4
    assert with_nproc(["torchrun", "--nproc_per_node=4", "t.py", "--", "--nproc", "9"], 2) == [
        "torchrun", "--nproc_per_node=2", "t.py", "--", "--nproc", "9"]
    assert nproc_of(["python", "t.py"]) is None
    with pytest.raises(ConfigError, match="has no --nproc-per-node / --nproc_per_node / --nproc flag"):
        CommandScaler(PROFILE, ["python", "t.py"])
    with pytest.raises(ConfigError, match="runs 3 processes, not a count in p.csv"):
        CommandScaler(PROFILE, ["torchrun", "--nproc-per-node", "3", "t.py"])


def _run(tmp_path: Path, fail_at: str) -> tuple[int, list[str], list[dict], Engine]:
    clock = ReplayClock(T0, speedup=SPEEDUP)
    # Clean for two hours, then dirty: 2 h of work at 2 processes fits in the clean hours at 4.
    signals = TraceSignals(hourly(T0, [50, 50] + [900] * 10), clock)
    log = EventLog(tmp_path / "run.jsonl")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out.txt"
    argv = [sys.executable, str(script), str(out), str(tmp_path / "state"), "150", fail_at, "--nproc-per-node", "2"]
    scaler = CommandScaler(PROFILE, argv)
    engine = Engine(load_policy("carbon-aware"), Collaborators(clock=clock, signals=signals, event_log=log),
                    progress=Progress(work_total_s=2 * 3600, step_time_s=0.05 * SPEEDUP),
                    deadline=DeadlineGuard(T0 + timedelta(hours=10), simulated=True),
                    decide_interval_s=120, countdown=False, scaling=Scaling(scaler=scaler))
    child = ChildProcess(argv, env={**os.environ, "OMP_NUM_THREADS": "1"})
    status = Supervisor(engine, child, pause_mode="checkpoint", poll_s=0.05, scaler=scaler).run(engine.begin())
    engine.close()
    log.close()
    return status, out.read_text().split(), read_events(tmp_path / "run.jsonl"), engine


def test_a_clean_grid_relaunches_the_command_with_more_processes(tmp_path: Path) -> None:
    status, ticks, events, engine = _run(tmp_path, fail_at="none")
    assert status == 0
    assert set(ticks) == {"4"}, "planned before the first launch: it starts at 4 processes"
    changed = [e for e in events if e["event"] == "replicas" and e["kind"] == "actual"]
    assert changed and changed[0]["replicas_from"] == 2 and changed[0]["replicas"] == 4
    planned = [e["replicas"] for e in events if e["event"] == "replicas" and e["kind"] == "planned"]
    assert planned[:2] == [0, 4], "a delayed start (0 replicas), then 4"
    assert engine.progress.work_total_s == pytest.approx(3600.0)  # 2 h at 2 processes is 1 h at 4
    assert engine.io.job_stats.replicas_actual == 4 and engine.io.job_stats.replicas_planned == 4


def test_a_count_that_fails_at_launch_falls_back(tmp_path: Path) -> None:
    status, ticks, events, engine = _run(tmp_path, fail_at="4")
    assert status == 0
    assert ticks and set(ticks) == {"2"}, "the launch at 4 failed; the work ran at 2"
    notes = [n for n in engine.notes if "falling back to 2 replicas" in n]
    assert notes and "relaunch at 4 replicas failed (exit 1)" in notes[0]
    assert engine.scaling is not None and 4 not in engine.scaling.scaler.profile.replica_counts
