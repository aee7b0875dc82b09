"""Carbon scaling under the Slurm batch template, on a real single-node cluster: requeue at the new count,
and fall back to the count that worked when the run at the new one fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from greentrain.integrations.slurm import PAUSED_EXIT_CODE, REPLICAS_FILE_ENV, write_replicas

from test_slurm_scripts import ASSETS, _wait

TRAINER = """#!/bin/bash
# Stands in for an elastic trainer: run 0 asks for 2 tasks (checkpoint, count, exit 75); run 1, at 2 tasks,
# fails as a run at a size that does not fit would; run 2 is back at 1 task and finishes.
run="${SLURM_RESTART_COUNT:-0}"
echo "run $run: $SLURM_NTASKS tasks" >> "$LOG"
case "$run" in
  0) echo 2 > "$GREENTRAIN_REPLICAS_FILE"; exit EXIT_CODE ;;
  1) exit 1 ;;
  *) exit 0 ;;
esac
"""


def test_write_replicas_only_under_the_template(tmp_path: Path) -> None:
    assert write_replicas(4, env={}) is None
    target = tmp_path / "replicas"
    assert write_replicas(4, env={REPLICAS_FILE_ENV: str(target)}) == target
    assert target.read_text() == "4\n"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_template_requeues_at_the_new_count_and_falls_back(slurm_cluster, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    trainer = tmp_path / "trainer.sh"
    trainer.write_text(TRAINER.replace("EXIT_CODE", str(PAUSED_EXIT_CODE)))
    batch = tmp_path / "job.sbatch"
    batch.write_text((ASSETS / "greentrain-job.sbatch").read_text()
                     .replace("train=(srun python train.py)", f"train=(bash {trainer})"))
    env = {**slurm_cluster.env, "LOG": str(log), "GREENTRAIN_SCALE_BY": "tasks"}
    out = subprocess.run(["sbatch", "--parsable", "--ntasks=1", f"--output={tmp_path}/out.txt",
                          f"--chdir={tmp_path}", str(batch)], env=env, capture_output=True, text=True, timeout=30,
                         check=True)
    job_id = out.stdout.strip()
    for restarts in ("1", "2"):
        _wait(lambda r=restarts: slurm_cluster.scontrol_job(job_id)["Restarts"] == r
              and slurm_cluster.scontrol_job(job_id)["JobState"] == "PENDING", 60, f"requeue {restarts}")
        _wait(slurm_cluster.node_idle, 30, "node to finish cleaning up")
        slurm_cluster.next_second()
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env=env, timeout=30, check=True)
    _wait(lambda: slurm_cluster.scontrol_job(job_id)["JobState"] == "COMPLETED", 60,
          f"last run: {slurm_cluster.scontrol_job(job_id)}")
    assert log.read_text().splitlines() == ["run 0: 1 tasks", "run 1: 2 tasks", "run 2: 1 tasks"], (tmp_path / "out.txt").read_text()
    output = (tmp_path / "out.txt").read_text()
    assert "requeueing at 2 (tasks)" in output
    assert "the run at the new size failed (exit 1); falling back to 1 (tasks)" in output
