"""Under DDP (2 CPU ranks, gloo) every rank pauses at rank 0's step, saves, resumes and ends identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gt_dirty_spell import dirty_spell_trace

from tests.ranks import free_port

import transformers  # noqa: E402,F401  (a dev dependency: missing is an error)

WORKER = Path(__file__).with_name("gt_hf_ddp_worker.py")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_all_ranks_pause_at_the_same_step_and_finish_identically(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text('[policy]\nkind = "threshold"\nthreshold_g_per_kwh = 200\n\n'
                                          '[settings]\npause_mode = "checkpoint"\nresume_overhead_s = 0\n')
    dirty_spell_trace(tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "MASTER_ADDR": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-addr=127.0.0.1",
         f"--master-port={free_port()}", str(WORKER), str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=220)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["paused"] for r in ranks), ranks
    assert ranks[0]["paused_at"] == ranks[1]["paused_at"] < 12
    assert ranks[0]["final_step"] == ranks[1]["final_step"] == 12
    assert ranks[0]["checksum"] == ranks[1]["checksum"]
