"""``greentrain submit`` against a real single-node Slurm cluster: plan, pend, reschedule, run."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gt_trace import write_trace

from greentrain.integrations.slurm import parse_slurm_time

TRACE_START = datetime(2022, 1, 1, tzinfo=UTC)
REPLAY = ["--replay-start", "2022-01-01T00:00Z"]
HOUR = timedelta(hours=1)


def submit(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "greentrain", "submit", *args], env=cluster.env,
                          capture_output=True, text=True, timeout=60)


def planned(stdout: str) -> datetime:
    match = re.search(r"start (\S+) forecast", stdout) or re.search(r"-> (\S+) \(", stdout)
    assert match, stdout
    return datetime.fromisoformat(match.group(1))


def slurm_start(cluster, job_id: str) -> datetime:
    start = parse_slurm_time(cluster.scontrol_job(job_id)["StartTime"])
    assert start is not None
    return start


def wait_for(predicate, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.timeout(150)
def test_submit_pends_at_planned_start_is_rescheduled_and_runs(slurm_cluster, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\necho \"ran $SLURM_JOB_ID\" > {marker}\n")
    # Cleanest two hours are hours 2-3 of the replayed day.
    first = write_trace(tmp_path / "a.csv", "GB", TRACE_START, [300, 300, 90, 80] + [300] * 44)
    before = datetime.now(UTC)
    done = submit(slurm_cluster, "--zone", "GB", "--deadline", "+24", "--estimate-hours", "2",
                  "--replay-trace", str(first), *REPLAY, "--", f"--output={tmp_path}/out-%j.txt", str(script))
    after = datetime.now(UTC)
    assert done.returncode == 0, done.stderr
    job_id = re.search(r"submitted job (\d+)", done.stdout).group(1)
    start = planned(done.stdout)
    assert before + 2 * HOUR <= start <= after + 2 * HOUR + timedelta(seconds=1)
    record = slurm_cluster.scontrol_job(job_id)
    assert (record["JobState"], record["Reason"]) == ("PENDING", "BeginTime")
    assert slurm_start(slurm_cluster, job_id) == start
    assert "greentrain(zone=GB;" in record["Comment"]

    # The forecast changes: the clean spell is now five hours out.
    second = write_trace(tmp_path / "b.csv", "GB", TRACE_START, [300] * 5 + [60, 60] + [300] * 41)
    now = datetime.now(UTC)
    done = submit(slurm_cluster, "--reschedule", job_id, "--replay-trace", str(second), *REPLAY)
    assert done.returncode == 0, done.stderr
    assert "moved" in done.stdout
    moved_to = slurm_start(slurm_cluster, job_id)
    assert abs((moved_to - (now + 5 * HOUR)).total_seconds()) <= 5
    assert slurm_cluster.scontrol_job(job_id)["JobState"] == "PENDING"

    # And again: the cleanest hours are right now, so the job starts and runs.
    third = write_trace(tmp_path / "c.csv", "GB", TRACE_START, [40, 40] + [300] * 46)
    slurm_cluster.next_second()
    done = submit(slurm_cluster, "--reschedule", job_id, "--replay-trace", str(third), *REPLAY)
    assert done.returncode == 0, done.stderr
    wait_for(marker.exists, 60, f"job {job_id} to run")
    assert marker.read_text().strip() == f"ran {job_id}"
    wait_for(lambda: slurm_cluster.scontrol_job(job_id)["JobState"] == "COMPLETED", 30, "job completion")

    # A finished job cannot be moved: one line, exit 2, no traceback.
    done = submit(slurm_cluster, "--reschedule", job_id, "--replay-trace", str(third), *REPLAY)
    assert done.returncode == 2
    assert "only a PENDING job" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.timeout(90)
def test_submit_picks_the_place_with_lowest_expected_emissions(slurm_cluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    gb = write_trace(tmp_path / "gb.csv", "GB", TRACE_START, [200] * 48)
    de = write_trace(tmp_path / "de.csv", "DE-LU", TRACE_START, [450, 120, 110, 450] + [450] * 44)
    now = datetime.now(UTC)
    done = submit(slurm_cluster, "--place", "uk=GB", "--place", "de=DE-LU", "--deadline", "+12",
                  "--power-limit-w", "220", "--replay-trace", str(gb), "--replay-trace", str(de), *REPLAY,
                  "--", "--time=2:00:00", f"--output={tmp_path}/out-%j.txt", str(script))
    assert done.returncode == 0, done.stderr
    job_id = re.search(r"submitted job (\d+)", done.stdout).group(1)
    try:
        record = slurm_cluster.scontrol_job(job_id)
        assert record["Partition"] == "de"
        assert record["JobState"] == "PENDING"
        assert abs((slurm_start(slurm_cluster, job_id) - (now + HOUR)).total_seconds()) <= 5
        # the estimate came from --time; the prolog's power cap travels in the comment
        assert "estimate_h=2;power_limit_w=220)" in record["Comment"]
    finally:
        subprocess.run(["scancel", job_id], env=slurm_cluster.env, timeout=30, check=False)


@pytest.mark.timeout(150)
def test_a_pending_or_requeued_job_is_re_placed_among_the_places_it_was_submitted_with(slurm_cluster,
                                                                                     tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    gb = write_trace(tmp_path / "gb.csv", "GB", TRACE_START, [200] * 48)
    de = write_trace(tmp_path / "de.csv", "DE-LU", TRACE_START, [450, 450, 450, 120, 110] + [450] * 43)
    done = submit(slurm_cluster, "--place", "uk=GB", "--place", "de=DE-LU", "--deadline", "+24",
                  "--replay-trace", str(gb), "--replay-trace", str(de), *REPLAY,
                  "--", "--time=2:00:00", f"--output={tmp_path}/out-%j.txt", str(script))
    assert done.returncode == 0, done.stderr
    job_id = re.search(r"submitted job (\d+)", done.stdout).group(1)
    try:
        record = slurm_cluster.scontrol_job(job_id)
        assert record["Partition"] == "de" and "greentrain(zone=DE-LU;places=uk=GB,de=DE-LU;" in record["Comment"]

        # The forecast changes (as when the job comes back requeued after a pause): GB now has the clean spell.
        gb_clean = write_trace(tmp_path / "gb2.csv", "GB", TRACE_START, [200, 200, 60, 50] + [200] * 44)
        de_dirty = write_trace(tmp_path / "de2.csv", "DE-LU", TRACE_START, [450] * 48)
        now = datetime.now(UTC)
        done = submit(slurm_cluster, "--reschedule", job_id, "--replay-trace", str(gb_clean),
                      "--replay-trace", str(de_dirty), *REPLAY)
        assert done.returncode == 0, done.stderr
        assert f"job {job_id}: moved to uk (GB)" in done.stdout, done.stdout
        record = slurm_cluster.scontrol_job(job_id)
        assert record["Partition"] == "uk" and record["JobState"] == "PENDING"
        assert "greentrain(zone=GB;places=uk=GB,de=DE-LU;" in record["Comment"]  # the tag follows the move
        assert abs((slurm_start(slurm_cluster, job_id) - (now + 2 * HOUR)).total_seconds()) <= 5

        # Nothing cleaner elsewhere: it stays where it is (the start kept).
        done = submit(slurm_cluster, "--reschedule", job_id, "--replay-trace", str(gb_clean),
                      "--replay-trace", str(de_dirty), *REPLAY)
        assert done.returncode == 0, done.stderr
        assert "moved to" not in done.stdout and slurm_cluster.scontrol_job(job_id)["Partition"] == "uk"
    finally:
        subprocess.run(["scancel", job_id], env=slurm_cluster.env, timeout=30, check=False)
