"""The Slurm prolog/epilog (GPU power limits, journaled) and the requeue-on-pause batch template."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from greentrain.device.profiles import load_gpu_profile
from greentrain.integrations.slurm import PAUSED_EXIT_CODE, parse_slurm_time

ASSETS = Path(__file__).resolve().parents[2] / "integrations" / "slurm"
FAKE = Path(__file__).with_name("gt_fake_nvidia_smi.py")


@pytest.fixture()
def node(tmp_path: Path) -> dict:
    """Three V100s with the power-limit range measured in the Zeus profile, at their default (max)."""
    profile = load_gpu_profile("v100")
    limits = [p.power_limit_w for w in profile.workloads() for p in profile.points(w)]
    low, high = min(limits), max(limits)
    state = tmp_path / "gpus.json"
    state.write_text(json.dumps({str(i): {"limit": high, "min": low, "max": high} for i in range(3)}))
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    smi.chmod(0o755)
    journal = tmp_path / "journal"
    env = {"PATH": os.environ["PATH"], "FAKE_NVSMI_STATE": str(state), "GREENTRAIN_NVIDIA_SMI": str(smi),
           "GREENTRAIN_JOURNAL_DIR": str(journal), "GREENTRAIN_SLURM_CONF": str(tmp_path / "none.env")}
    return {"env": env, "state": state, "journal": journal, "min": low, "max": high, "tmp": tmp_path}


def run(script: str, node: dict, **slurm_env: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", str(ASSETS / script)], env={**node["env"], **slurm_env},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr  # a failing prolog/epilog would drain the node
    return done


def limits(node: dict) -> dict[str, float]:
    return {i: g["limit"] for i, g in json.loads(node["state"].read_text()).items()}


@pytest.mark.timeout(60)
def test_prolog_sets_only_the_jobs_gpus_and_epilog_restores(node: dict) -> None:
    comment = "greentrain(zone=GB;deadline=2026-11-22T06:00:00Z;estimate_h=4;power_limit_w=175)"
    run("prolog.sh", node, SLURM_JOB_ID="7", SLURM_JOB_GPUS="0,2", SLURM_JOB_COMMENT=comment)
    assert limits(node) == {"0": 175.0, "1": node["max"], "2": 175.0}
    assert (node["journal"] / "gpu-0").read_text().split() == [str(int(node["max"])), "7"]
    run("epilog.sh", node, SLURM_JOB_ID="7", SLURM_JOB_GPUS="0,2")
    assert limits(node) == {"0": node["max"], "1": node["max"], "2": node["max"]}
    assert list(node["journal"].iterdir()) == []


@pytest.mark.timeout(60)
def test_prolog_clamps_to_the_gpu_range_and_uses_the_site_default(node: dict) -> None:
    run("prolog.sh", node, SLURM_JOB_ID="8", SLURM_JOB_GPUS="1", SLURM_JOB_COMMENT="power_limit_w=20")
    assert limits(node)["1"] == node["min"]
    run("epilog.sh", node, SLURM_JOB_ID="8", SLURM_JOB_GPUS="1")
    conf = node["tmp"] / "site.env"
    conf.write_text("GREENTRAIN_POWER_LIMIT_W=200\n")
    run("prolog.sh", node, SLURM_JOB_ID="9", SLURM_JOB_GPUS="1", GREENTRAIN_SLURM_CONF=str(conf))
    assert limits(node)["1"] == 200.0


@pytest.mark.timeout(60)
def test_no_request_changes_nothing(node: dict) -> None:
    run("prolog.sh", node, SLURM_JOB_ID="10", SLURM_JOB_GPUS="0,1,2", SLURM_JOB_COMMENT="just a note")
    assert set(limits(node).values()) == {node["max"]}
    assert not node["journal"].exists()


@pytest.mark.timeout(60)
def test_a_lost_epilog_still_restores_the_pristine_limit(node: dict) -> None:
    run("prolog.sh", node, SLURM_JOB_ID="11", SLURM_JOB_GPUS="0", SLURM_JOB_COMMENT="power_limit_w=150")
    # Job 11's node crashed before its epilog; job 12 lands on the same GPU with another cap.
    run("prolog.sh", node, SLURM_JOB_ID="12", SLURM_JOB_GPUS="0", SLURM_JOB_COMMENT="power_limit_w=125")
    assert limits(node)["0"] == 125.0
    run("epilog.sh", node, SLURM_JOB_ID="12", SLURM_JOB_GPUS="0")
    assert limits(node)["0"] == node["max"]


@pytest.mark.timeout(60)
def test_failed_restore_keeps_the_journal_for_a_retry(node: dict) -> None:
    run("prolog.sh", node, SLURM_JOB_ID="13", SLURM_JOB_GPUS="2", SLURM_JOB_COMMENT="power_limit_w=150")
    done = run("epilog.sh", node, SLURM_JOB_ID="13", SLURM_JOB_GPUS="2", FAKE_NVSMI_FAIL_SET="1")
    assert "journal kept" in done.stderr
    assert (node["journal"] / "gpu-2").exists()
    run("epilog.sh", node, SLURM_JOB_ID="14", SLURM_JOB_GPUS="2")
    assert limits(node)["2"] == node["max"]


@pytest.mark.timeout(60)
def test_hostile_values_are_never_executed(node: dict) -> None:
    canary = node["tmp"] / "pwned"
    run("prolog.sh", node, SLURM_JOB_ID="15", SLURM_JOB_GPUS=f"0,$(touch {canary}),1;touch {canary}",
        SLURM_JOB_COMMENT=f"power_limit_w=150$(touch {canary})")
    assert not canary.exists()
    # Only the well-formed parts are used: the number 150, and GPU "0"; the rest is skipped, never run.
    assert limits(node) == {"0": 150.0, "1": node["max"], "2": node["max"]}


TRAINER = """#!/bin/bash
# Stands in for a trainer: first run waits to be paused (USR1), checkpoints, names a resume time, exits 75.
if [ "${SLURM_RESTART_COUNT:-0}" -eq 0 ]; then
  trap 'echo 1 > "$CKPT"; echo "RESUME_AT" > "$GREENTRAIN_RESUME_FILE"; exit EXIT_CODE' USR1
  echo started >> "$LOG"
  while :; do sleep 0.1; done
fi
echo "resumed from step $(cat "$CKPT")" >> "$LOG"
"""


@pytest.mark.timeout(120)
def test_template_requeues_on_pause_and_resumes_at_the_named_time(slurm_cluster, tmp_path: Path) -> None:
    log, ckpt = tmp_path / "train.log", tmp_path / "ckpt"
    resume_at = "2031-01-01T00:00:00"
    trainer = tmp_path / "trainer.sh"
    trainer.write_text(TRAINER.replace("RESUME_AT", resume_at).replace("EXIT_CODE", str(PAUSED_EXIT_CODE)))
    template = (ASSETS / "greentrain-job.sbatch").read_text()
    assert "train=(srun python train.py)" in template
    batch = tmp_path / "job.sbatch"
    batch.write_text(template.replace("train=(srun python train.py)", f"train=(bash {trainer})"))
    env = {**slurm_cluster.env, "LOG": str(log), "CKPT": str(ckpt)}
    out = subprocess.run(["sbatch", "--parsable", f"--output={tmp_path}/out.txt", f"--chdir={tmp_path}",
                          str(batch)], env=env, capture_output=True, text=True, timeout=30, check=True)
    job_id = out.stdout.strip()
    _wait(lambda: log.exists() and "started" in log.read_text(), 30, "trainer start")
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], env=env, timeout=30, check=True)
    _wait(lambda: slurm_cluster.scontrol_job(job_id)["Restarts"] == "1"
          and slurm_cluster.scontrol_job(job_id)["JobState"] == "PENDING", 30, "requeue")
    _wait(lambda: slurm_cluster.scontrol_job(job_id)["StartTime"] == resume_at, 30, "start time set")
    assert parse_slurm_time(slurm_cluster.scontrol_job(job_id)["StartTime"]).year == 2031
    # The scheduler (or `greentrain submit --reschedule`) releases it; it resumes from the checkpoint.
    _wait(slurm_cluster.node_idle, 30, "node to finish cleaning up the first run")
    slurm_cluster.next_second()
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env=env, timeout=30, check=True)
    _wait(lambda: slurm_cluster.scontrol_job(job_id)["JobState"] == "COMPLETED", 60,
          f"second run: {slurm_cluster.scontrol_job(job_id)} {slurm_cluster.sinfo()}")
    assert log.read_text().splitlines() == ["started", "resumed from step 1"]


def _wait(predicate, timeout_s: float, what) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")
