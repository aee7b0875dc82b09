"""``greentrain fleet run`` against a real 16-node Slurm cluster, on a compressed clock.

One plan hour is a few seconds. Two sleep "trainers" run under greentrain's
batch template (USR1: save progress, exit 75, the template requeues). The
replayed grid is dirty, clean, dirty, clean: the controller must hold both jobs
through the first dirty hours, start them in the clean ones, pause the long
one by requeue through the dirty hour, and resume it in the next clean spell;
and it must carry on across its own restart in the middle of the pause.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gt_slurm_cluster import SlurmCluster, slurm_missing
from gt_trace import write_trace

from greentrain.integrations.slurm import PAUSED_EXIT_CODE

HOUR_S = 6.0  # long enough for a controller to start again within an hour on a loaded 2-core machine
ASSETS = Path(__file__).resolve().parents[2] / "integrations" / "slurm"
TRAINER = """#!/bin/bash
# A sleep job that keeps its progress in a file: USR1 saves it and exits 75 (the template requeues).
name=$1; work_cs=$2; log=$3; progress=$4
done_cs=$(cat "$progress" 2>/dev/null || echo 0)
if [ "$done_cs" -gt 0 ]; then event=resume; else event=start; fi
echo "$event $name $(date +%s.%N)" >> "$log"
trap 'echo "$done_cs" > "$progress"; echo "pause $name $(date +%s.%N)" >> "$log"; exit EXIT_CODE' USR1
while [ "$done_cs" -lt "$work_cs" ]; do sleep 0.1; done_cs=$((done_cs + 10)); done
echo "$done_cs" > "$progress"
echo "end $name $(date +%s.%N)" >> "$log"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    why = slurm_missing()
    if why:
        pytest.skip(why)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm16"), nodes=16, gpus_per_node=1)
    try:
        cluster.start(timeout_s=60)
        yield cluster
    finally:
        cluster.stop()


def _submit(cluster: SlurmCluster, tmp: Path, name: str, gpus: int, work_h: float, deadline: datetime) -> str:
    trainer = tmp / "trainer.sh"
    batch = tmp / f"{name}.sbatch"
    template = (ASSETS / "greentrain-job.sbatch").read_text()
    work_cs = int(work_h * HOUR_S * 100)
    batch.write_text(template.replace(
        "train=(srun python train.py)", f"train=(bash {trainer} {name} {work_cs} {tmp}/events.log {tmp}/{name}.progress)"))
    tag = f"greentrain-fleet(deadline={deadline.strftime('%Y-%m-%dT%H:%M:%SZ')};estimate_h={work_h:g})"
    done = subprocess.run(["sbatch", "--parsable", "--hold", f"--gpus={gpus}", f"--comment={tag}", f"--chdir={tmp}",
                           f"--output={tmp}/{name}-%j.out", str(batch)], env=cluster.env, capture_output=True,
                          text=True, timeout=30, check=True)
    return done.stdout.strip()


def _controller(cluster: SlurmCluster, tmp: Path, trace: Path, log_name: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "greentrain", "fleet", "run", "--partition", "gpu=GB", "--state-dir",
            str(tmp / "state"), "--interval-s", "1", "--seconds-per-hour", f"{HOUR_S:g}", "--replay-trace", str(trace),
            "--replay-start", "2022-01-01T00:00Z", "--resume-overhead-min", "5"]
    out = (tmp / log_name).open("w")
    return subprocess.Popen(argv, env=cluster.env, stdout=out, stderr=subprocess.STDOUT)


def _events(tmp: Path) -> list[tuple[str, str, float]]:
    path = tmp / "events.log"
    if not path.exists():
        return []
    return [(e, n, float(t)) for e, n, t in (line.split() for line in path.read_text().splitlines() if line.strip())]


def _wait(predicate, timeout_s: float, what, tmp: Path | None = None) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    logs = "".join(p.read_text() for p in sorted(tmp.glob("controller-*.log"))) if tmp else ""
    raise AssertionError(f"timed out waiting for {what}; events {_events(tmp) if tmp else []}; controller:\n{logs}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.timeout(200)
def test_held_started_paused_by_requeue_and_resumed_in_the_planned_order(cluster: SlurmCluster, tmp_path: Path) -> None:
    (tmp_path / "trainer.sh").write_text(TRAINER.replace("EXIT_CODE", str(PAUSED_EXIT_CODE)))
    # Plan hours 0-1 dirty, 2-3 clean, 4 dirty, 5-6 clean, then dirty: no three clean hours in a row,
    # so the three-hour job runs two, pauses through hour 4 and finishes in hours 5-6.
    trace = write_trace(tmp_path / "gb.csv", "GB", datetime(2022, 1, 1, tzinfo=UTC),
                        [450, 450, 40, 40, 450, 40, 40] + [450] * 40)
    deadline = datetime.now(UTC) + timedelta(seconds=10 * HOUR_S)
    short = _submit(cluster, tmp_path, "short", 8, 1.0, deadline)
    long_ = _submit(cluster, tmp_path, "long", 8, 3.0, deadline)
    first = _controller(cluster, tmp_path, trace, "controller-1.log")
    journal_path = tmp_path / "state" / "fleet-journal.json"
    try:
        _wait(journal_path.exists, 30, "the controller's first round")
        origin = datetime.fromisoformat(json.loads(journal_path.read_text())["origin"]).timestamp()
        assert time.time() < origin + 1.5 * HOUR_S, "the controller took too long to start for this test"
        # Hour 1: both held back (released from --hold, StartTime set to the clean hours).
        time.sleep(max(0.0, origin + 1.5 * HOUR_S - time.time()))
        for job_id in (short, long_):
            record = cluster.scontrol_job(job_id)
            assert record["JobState"] == "PENDING", record
        assert _events(tmp_path) == []
        # Hour 4: the long job is paused by requeue; stop the controller as soon as it has signalled.
        _wait(lambda: any(e == "pause" for e, _, _ in _events(tmp_path)), 8 * HOUR_S, "the pause", tmp_path)
        _stop(first)
        journal = json.loads(journal_path.read_text())
        assert long_ in journal["jobs"]
        second = _controller(cluster, tmp_path, trace, "controller-2.log")
        try:
            _wait(lambda: [e for e, n, _ in _events(tmp_path) if n == "long"][-1:] == ["end"], 10 * HOUR_S,
                  "the long job to finish", tmp_path)
        finally:
            _stop(second)
    finally:
        _stop(first)
    logs = "".join((tmp_path / f"controller-{i}.log").read_text() for i in (1, 2))
    events = _events(tmp_path)
    order = [(e, n) for e, n, _ in sorted(events, key=lambda x: x[2])]
    assert [x for x in order if x[1] == "long"] == [("start", "long"), ("pause", "long"), ("resume", "long"),
                                                   ("end", "long")], (order, logs)
    assert [x for x in order if x[1] == "short"] == [("start", "short"), ("end", "short")], (order, logs)
    hour = {(e, n): (t - origin) / HOUR_S for e, n, t in events}
    # In the planned hours (a second of slack for Slurm's scheduling passes).
    slack = 1.0 / HOUR_S + 0.35
    assert 2 - slack <= hour[("start", "long")] <= 3 and hour[("pause", "long")] - hour[("start", "long")] > 1.5
    assert 2 - slack <= hour[("start", "short")] <= 3 + slack and hour[("end", "short")] <= 4 + slack, (hour, logs)
    assert 4 - slack <= hour[("pause", "long")] <= 5, (hour, logs)
    assert 5 - slack <= hour[("resume", "long")] <= 6.5, (hour, logs)
    record = cluster.scontrol_job(long_)
    assert record["Restarts"] == "1" and record["JobState"] in ("COMPLETED", "COMPLETING"), record
    assert "pause (USR1" in logs and "cancel" not in logs.lower()
