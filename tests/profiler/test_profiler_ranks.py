"""Two real gloo ranks measure different things and still agree on one profile and one precision."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ranks import free_port

SCRIPT = Path(__file__).with_name("two_rank_agreement.py")


@pytest.mark.timeout(120)
def test_two_ranks_agree_on_profile_cache_and_precision(tmp_path: Path) -> None:
    port = str(free_port())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    procs = [
        subprocess.Popen([sys.executable, str(SCRIPT), str(r), "2", port, str(tmp_path / "state"), str(tmp_path / "cache")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for r in range(2)
    ]
    outs = [p.communicate(timeout=110) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    rank0, rank1 = (json.loads(out) for out, _ in outs)
    assert rank0 == rank1, "ranks disagree"
    first, second = rank0["profile"]
    assert not first["from_cache"] and second["from_cache"] and second["steps"] == 1
    assert first["points"] == second["points"]
    # whole-job power is the sum of both GPUs: more than either workload alone draws at full power (~240 W)
    assert first["points"][0][2] > 300
    assert not (tmp_path / "cache" / "rank1").exists() or not any((tmp_path / "cache" / "rank1").iterdir())
    # precision: trial energies summed over ranks (fp16 11 J < bf16 15 J < fp32 20 J) -> fp16 on both;
    # rank 1's private divergence is not acted on; rank 0's at step 40 reverts both to bf16 at the same step
    switches = rank0["precision"]
    assert [to for _, to in switches] == ["bf16", "fp16", "bf16"]
    assert 40 <= switches[-1][0] < 45
