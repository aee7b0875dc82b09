"""``greentrain fleet run`` moves jobs between two partitions on two grid zones of a real slurmctld.

The cluster has two one-GPU nodes: ``dirty`` (zone DIRTY, 450 g/kWh) and
``clean`` (zone CLEAN, 40 g/kWh). A held job submitted to ``dirty`` that may run
anywhere is moved to ``clean`` (``scontrol update Partition=``) and released
there; a job pinned to ``dirty`` (``places=dirty``) never moves. Each
``--once`` run is a controller start, so a second one is a restart; a
controller killed mid-round leaves a move the journal wrote down but did not
book, and its successor books it once, never making it twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gt_slurm_cluster import SlurmCluster, slurm_missing
from gt_trace import write_trace

from greentrain.integrations.fleet_journal import FleetJournal, JobEntry
from greentrain.integrations.fleet_moves import likely_place, place_options, settle_move

HOUR_S = 60.0
START = datetime(2022, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    why = slurm_missing()
    if why:
        pytest.skip(why)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm2"), nodes=2, gpus_per_node=1, partitions=("dirty", "clean"))
    try:
        cluster.start(timeout_s=60)
        yield cluster
    finally:
        cluster.stop()


def _traces(tmp: Path) -> list[str]:
    clean = write_trace(tmp / "clean.csv", "CLEAN", START, [40] * 48)
    dirty = write_trace(tmp / "dirty.csv", "DIRTY", START, [450] * 48)
    return ["--partition", f"clean=CLEAN:1:{clean}", "--partition", f"dirty=DIRTY:1:{dirty}"]


def _submit(cluster: SlurmCluster, tmp: Path, partition: str, places: str | None = None) -> str:
    deadline = (datetime.now(UTC) + timedelta(seconds=20 * HOUR_S)).strftime("%Y-%m-%dT%H:%M:%SZ")
    tag = f"greentrain-fleet(deadline={deadline};estimate_h=2{';places=' + places if places else ''})"
    done = subprocess.run(["sbatch", "--parsable", "--hold", "--gpus=1", f"--partition={partition}", f"--comment={tag}",
                           f"--chdir={tmp}", f"--output={tmp}/job-%j.out", "--wrap", "sleep 600"], env=cluster.env,
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip()


def _once(cluster: SlurmCluster, tmp: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "greentrain", "fleet", "run", *_traces(tmp), "--state-dir", str(tmp / "state"),
            "--seconds-per-hour", f"{HOUR_S:g}", "--replay-start", "2022-01-01T00:00Z", "--once"]
    return subprocess.run(argv, env=cluster.env, capture_output=True, text=True, timeout=120)


def _squeue_partition(cluster: SlurmCluster, job_id: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%P"], env=cluster.env, capture_output=True, text=True,
                         timeout=10, check=True).stdout
    return out.strip()


def _journal(tmp: Path) -> dict:
    return json.loads((tmp / "state" / "fleet-journal.json").read_text())


def _cancel(cluster: SlurmCluster, *job_ids: str) -> None:
    subprocess.run(["scancel", *job_ids], env=cluster.env, capture_output=True, timeout=30)


def _wait_running(cluster: SlurmCluster, job_id: str, timeout_s: float = 30.0) -> dict[str, str]:
    end = time.monotonic() + timeout_s
    record = cluster.scontrol_job(job_id)
    while time.monotonic() < end and record["JobState"] != "RUNNING":
        time.sleep(0.3)
        record = cluster.scontrol_job(job_id)
    return record


@pytest.mark.timeout(240)
def test_a_held_job_moves_to_the_clean_partition_once_and_a_pinned_one_stays(cluster: SlurmCluster,
                                                                              tmp_path: Path) -> None:
    roaming = _submit(cluster, tmp_path, "dirty")
    pinned = _submit(cluster, tmp_path, "dirty", places="dirty")
    try:
        cluster.next_second()
        first = _once(cluster, tmp_path)
        assert first.returncode == 0, first.stderr
        assert f"job {roaming}: move dirty -> clean" in first.stdout, (first.stdout, first.stderr)
        assert f"job {pinned}: move" not in first.stdout
        record = _wait_running(cluster, roaming)
        assert record["Partition"] == "clean" and record["JobState"] == "RUNNING", record
        assert _squeue_partition(cluster, roaming) == "clean"
        assert cluster.scontrol_job(pinned)["Partition"] == "dirty"
        journal = _journal(tmp_path)
        assert journal["migrations"] == 1
        assert journal["jobs"][roaming]["moves"] == 1 and journal["jobs"][roaming]["home"] == "dirty"
        # A restart: it reads the journal and Slurm, and moves nothing again.
        second = _once(cluster, tmp_path)
        assert second.returncode == 0, second.stderr
        assert "move" not in second.stdout, second.stdout
        journal = _journal(tmp_path)
        assert journal["migrations"] == 1 and journal["jobs"][roaming]["moves"] == 1
        assert journal["jobs"][pinned]["moves"] == 0 and journal["jobs"][pinned]["home"] == "dirty"
        assert _squeue_partition(cluster, roaming) == "clean" and _squeue_partition(cluster, pinned) == "dirty"
    finally:
        _cancel(cluster, roaming, pinned)


@pytest.mark.timeout(240)
def test_a_controller_killed_between_its_journal_and_slurm_books_the_move_once(cluster: SlurmCluster,
                                                                              tmp_path: Path) -> None:
    # The journal wrote the move down, Slurm made it, then the controller died before booking it.
    job_id = _submit(cluster, tmp_path, "dirty")
    try:
        journal = FleetJournal.open(tmp_path / "state" / "fleet-journal.json", now=datetime.now(UTC), hour_s=HOUR_S)
        journal.entry(job_id).moving_to = "clean"
        journal.entry(job_id).home = "dirty"
        journal.save()
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "Partition=clean"], env=cluster.env, check=True,
                       capture_output=True, timeout=30)
        cluster.next_second()
        restarted = _once(cluster, tmp_path)
        assert restarted.returncode == 0, restarted.stderr
        assert "found made in Slurm; booked once" in restarted.stderr, restarted.stderr
        assert "move" not in restarted.stdout and f"job {job_id}: release" in restarted.stdout, restarted.stdout
        data = _journal(tmp_path)
        assert data["migrations"] == 1 and data["jobs"][job_id]["moves"] == 1
        assert data["jobs"][job_id]["moving_to"] is None
        record = _wait_running(cluster, job_id)
        assert record["Partition"] == "clean" and record["JobState"] == "RUNNING", record
        again = _once(cluster, tmp_path)
        assert "move" not in again.stdout and _journal(tmp_path)["migrations"] == 1, again.stdout
    finally:
        _cancel(cluster, job_id)


@pytest.mark.timeout(240)
def test_a_controller_killed_before_slurm_moved_the_job_plans_the_move_again(cluster: SlurmCluster,
                                                                            tmp_path: Path) -> None:
    # The journal wrote the move down and the controller died before asking Slurm: the job is still in dirty.
    job_id = _submit(cluster, tmp_path, "dirty")
    try:
        journal = FleetJournal.open(tmp_path / "state" / "fleet-journal.json", now=datetime.now(UTC), hour_s=HOUR_S)
        journal.entry(job_id).moving_to = "clean"
        journal.save()
        cluster.next_second()
        restarted = _once(cluster, tmp_path)
        assert restarted.returncode == 0, restarted.stderr
        assert "not made (still in dirty)" in restarted.stderr, restarted.stderr
        assert f"job {job_id}: move dirty -> clean" in restarted.stdout, restarted.stdout
        data = _journal(tmp_path)
        assert data["migrations"] == 1 and data["jobs"][job_id]["moves"] == 1
        assert _wait_running(cluster, job_id)["Partition"] == "clean"
    finally:
        _cancel(cluster, job_id)


def test_fleet_run_with_a_bad_partition_says_so_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "greentrain", "fleet", "run", "--partition", "clean=GB:many:x.csv",
                           "--state-dir", str(tmp_path / "state"), "--once"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--partition 'clean=GB:many:x.csv'" in lines[0] and "GPUS" in lines[0], lines
    assert not (tmp_path / "state").exists()


# The pieces, without Slurm.

def test_place_options_list_where_the_job_is_first_and_keep_a_pinned_job_home() -> None:
    capacity = {"clean": 4, "dirty": 4, "small": 1}
    roaming = place_options("dirty", 2, 1.4, (), capacity, running=False)
    assert [o.partition for o in roaming] == ["dirty", "clean"]  # small cannot hold 2 GPUs
    assert [o.partition for o in place_options("dirty", 2, 1.4, ("dirty",), capacity, running=False)] == ["dirty"]
    # Running outside its places: it keeps an option where it runs.
    assert [o.partition for o in place_options("dirty", 2, 1.4, ("clean",), capacity, running=True)] == \
        ["dirty", "clean"]


def test_likely_place_is_the_cleanest_zone_over_the_planned_hours_else_where_it_is() -> None:
    import numpy as np

    from greentrain.fleet import JobPlan, JobStatus

    status = JobStatus(job_id="1", options=place_options("dirty", 1, 0.7, (), {"clean": 1, "dirty": 1},
                                                         running=False), remaining_h=2.0, deadline_h=10.0,
                       partition="dirty")
    plan = JobPlan(job_id="1", option=None, next_start_h=3.0, finish_h=5.0, planned_emissions_g=0.0)
    zones = {"clean": "C", "dirty": "D"}
    values = {"C": np.array([40.0] * 3 + [500.0, 500.0] + [40.0] * 5), "D": np.array([450.0] * 3 + [100.0] * 7)}
    assert likely_place(status, plan, zones, values, 0) == "dirty"  # hours 3-4: dirty's zone is the cleaner
    values["C"][3:5] = 40.0
    assert likely_place(status, plan, zones, values, 0) == "clean"
    values["C"][:] = 100.0
    assert likely_place(status, plan, zones, values, 0) == "dirty"  # a tie: it stays


def test_settle_move_books_a_move_found_made_once_and_forgets_one_never_made() -> None:
    now = datetime(2026, 11, 28, tzinfo=UTC)
    journal = FleetJournal.open(None, now=now, hour_s=3600.0)
    entry = journal.entry("7")
    assert settle_move(entry, journal, "dirty", now) is None and entry.home == "dirty"
    entry.moving_to = "clean"
    assert "booked once" in (settle_move(entry, journal, "clean", now) or "")
    assert settle_move(entry, journal, "clean", now) is None
    assert (entry.moves, journal.migrations, entry.home) == (1, 1, "dirty")
    other = journal.entry("8")
    other.moving_to = "clean"
    assert "not made" in (settle_move(other, journal, "dirty", now) or "")
    assert other.moving_to is None and other.moves == 0 and journal.migrations == 1


def test_an_old_journal_without_moves_loads(tmp_path: Path) -> None:
    path = tmp_path / "fleet-journal.json"
    path.write_text(json.dumps({"version": 1, "origin": "2026-11-28T00:00:00+00:00", "hour_s": 60.0,
                                "jobs": {"3": {"done_h": 1.5, "resumes": 1}}}))
    journal = FleetJournal.open(path, now=datetime.now(UTC), hour_s=60.0)
    assert journal.migrations == 0 and journal.jobs["3"] == JobEntry(done_h=1.5, resumes=1)


TRAINER = """#!/bin/bash
# A sleep job that keeps its progress in a file: USR1 saves it and exits 75 (the template requeues).
work_cs=$1; log=$2; progress=$3
done_cs=$(cat "$progress" 2>/dev/null || echo 0)
if [ "$done_cs" -gt 0 ]; then event=resume; else event=start; fi
echo "$event $SLURM_JOB_PARTITION $(date +%s.%N)" >> "$log"
trap 'echo "$done_cs" > "$progress"; echo "pause $SLURM_JOB_PARTITION $(date +%s.%N)" >> "$log"; exit 75' USR1
while [ "$done_cs" -lt "$work_cs" ]; do sleep 0.1; done_cs=$((done_cs + 10)); done
echo "end $SLURM_JOB_PARTITION $(date +%s.%N)" >> "$log"
"""


@pytest.mark.timeout(240)
def test_a_running_job_is_checkpointed_requeued_and_resumed_in_the_other_partition(cluster: SlurmCluster,
                                                                                   tmp_path: Path) -> None:
    hour_s = 6.0
    # Plan hours 0-1 clean in clean, 2-3 clean in dirty; a three-hour job due by hour 5 must use both.
    clean = write_trace(tmp_path / "clean.csv", "CLEAN", START, [40, 40] + [450] * 46)
    dirty = write_trace(tmp_path / "dirty.csv", "DIRTY", START, [450, 450, 40, 40] + [450] * 44)
    (tmp_path / "trainer.sh").write_text(TRAINER)
    template = (Path(__file__).resolve().parents[2] / "integrations" / "slurm" / "greentrain-job.sbatch").read_text()
    batch = tmp_path / "job.sbatch"
    batch.write_text(template.replace("train=(srun python train.py)", f"train=(bash {tmp_path}/trainer.sh "
                                      f"{int(3 * hour_s * 100)} {tmp_path}/events.log {tmp_path}/progress)"))
    deadline = (datetime.now(UTC) + timedelta(seconds=5.5 * hour_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    job_id = subprocess.run(["sbatch", "--parsable", "--hold", "--gpus=1", "--partition=dirty",
                             f"--comment=greentrain-fleet(deadline={deadline};estimate_h=3)", f"--chdir={tmp_path}",
                             f"--output={tmp_path}/job-%j.out", str(batch)], env=cluster.env, capture_output=True,
                            text=True, timeout=30, check=True).stdout.strip()
    argv = [sys.executable, "-m", "greentrain", "fleet", "run", "--partition", f"clean=CLEAN:1:{clean}",
            "--partition", f"dirty=DIRTY:1:{dirty}", "--state-dir", str(tmp_path / "state"), "--interval-s", "1",
            "--seconds-per-hour", f"{hour_s:g}", "--replay-start", "2022-01-01T00:00Z", "--resume-overhead-min", "5"]
    log = tmp_path / "controller.log"
    controller = subprocess.Popen(argv, env=cluster.env, stdout=log.open("w"), stderr=subprocess.STDOUT)

    def events() -> list[tuple[str, str]]:
        path = tmp_path / "events.log"
        return [tuple(line.split()[:2]) for line in path.read_text().splitlines()] if path.exists() else []

    try:
        end = time.monotonic() + 12 * hour_s
        while time.monotonic() < end and ("end", "dirty") not in events():
            time.sleep(0.3)
    finally:
        controller.terminate()
        controller.wait(timeout=30)
        _cancel(cluster, job_id)
    out = log.read_text()
    assert events()[:1] == [("start", "clean")], (events(), out)
    assert ("pause", "clean") in events() and events()[-2:] == [("resume", "dirty"), ("end", "dirty")], (events(), out)
    assert f"job {job_id}: pause (USR1: checkpoint and requeue to move to dirty)" in out, out
    assert f"job {job_id}: move clean -> dirty" in out, out
    # Requeued held (the template, for a fleet job): no scheduling pass could restart it in clean before the
    # controller moved it; it ran again only once released, after the move.
    assert out.index(f"job {job_id}: move clean -> dirty") < out.rindex(f"job {job_id}: release"), out
    journal = _journal(tmp_path)
    assert journal["migrations"] == 2, (journal, out)  # dirty -> clean before its start, clean -> dirty after the pause


def test_the_fleet_tag_reads_and_renders_places() -> None:
    from greentrain.errors import ConfigError
    from greentrain.integrations.fleet_tag import FleetTag

    tag = FleetTag.find("x greentrain-fleet(deadline=2026-11-27T06:00:00Z;estimate_h=4;places=clean, dirty)", "5")
    assert tag is not None and tag.places == ("clean", "dirty")
    assert FleetTag.find(tag.render(), "5") == tag and "places=clean,dirty" in tag.render()
    with pytest.raises(ConfigError, match="places= names no partition"):
        FleetTag.find("greentrain-fleet(deadline=2026-11-27T06:00:00Z;estimate_h=4;places=)", "5")


def test_a_partition_trace_is_replayed_for_the_zone_the_partition_names(tmp_path: Path) -> None:
    from greentrain.integrations.fleet_forecast import ReplayIntensity

    trace = write_trace(tmp_path / "gb.csv", "GB", START, [100, 200, 300])
    replay = ReplayIntensity([], replay_start=START, by_zone={"CLEAN": trace})
    assert replay.zones == ["CLEAN"]
    assert list(replay("CLEAN", 1, 2, time_of=lambda h: START)) == [200.0, 300.0]


class _FakeSlurm:
    """Slurm as the controller reads it: one held job in dirty; moves and releases change the record."""

    def __init__(self, job: dict[str, str]) -> None:
        self.job, self.calls = job, []

    def jobs(self) -> list[dict[str, str]]:
        return [dict(self.job)]

    def nodes(self) -> list[dict[str, str]]:
        return [{"NodeName": "n1", "Partitions": "clean", "Gres": "gpu:1", "State": "IDLE"},
                {"NodeName": "n2", "Partitions": "dirty", "Gres": "gpu:1", "State": "IDLE"}]

    def set_partition(self, job_id: str, partition: str) -> None:
        self.calls.append(("partition", job_id, partition))
        self.job["Partition"] = partition

    def release(self, job_id: str) -> None:
        self.calls.append(("release", job_id))
        self.job["Reason"] = "None"

    def set_start(self, job_id: str, start: datetime) -> None:
        self.calls.append(("start", job_id))


def test_the_controller_moves_once_and_publishes_the_partitions_figures(tmp_path: Path) -> None:
    import numpy as np

    from greentrain.fleet.metrics import FleetStats
    from greentrain.integrations.fleet_controller import ControllerConfig, FleetController

    now = datetime(2026, 11, 28, 4, tzinfo=UTC)
    deadline = (now + timedelta(hours=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    slurm = _FakeSlurm({"JobId": "9", "JobState": "PENDING", "Partition": "dirty", "TresPerJob": "gres:gpu:1",
                        "Reason": "JobHeldUser", "Comment": f"greentrain-fleet(deadline={deadline};estimate_h=2)"})

    class Flat:
        notes: list[str] = []

        def __call__(self, zone, first_hour, hours, *, time_of):
            return np.full(hours, 40.0 if zone == "C" else 450.0)

    stats = FleetStats()
    path = tmp_path / "fleet-journal.json"
    config = ControllerConfig(partitions={"clean": "C", "dirty": "D"})
    controller = FleetController(slurm, FleetJournal.open(path, now=now, hour_s=3600.0), Flat(), config, stats)
    report = controller.round(now)
    assert report.actions == ["job 9: move dirty -> clean", "job 9: release"], (report.actions, report.notes)
    assert controller.migrations == 1 and slurm.job["Partition"] == "clean"
    figures = stats.snapshot().partitions
    assert set(figures.partitions) == {"clean", "dirty"} and figures.partitions["clean"].intensity_g_per_kwh == 40.0
    # A restarted controller (a new one on the same journal) moves nothing again.
    again = FleetController(slurm, FleetJournal.open(path, now=now, hour_s=3600.0), Flat(), config, FleetStats())
    report = again.round(now + timedelta(minutes=5))
    assert not any("move" in a for a in report.actions) and again.migrations == 1, report.actions
    assert [c[0] for c in slurm.calls] == ["partition", "release"]
