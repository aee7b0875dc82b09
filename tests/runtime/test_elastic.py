"""Carbon scaling in the runtime: a world-size schedule 1 -> 2 -> 4 -> 2 trains exactly like a fixed-size run.

Each launch runs real gloo ranks (from the test harness's forkserver) under a
real Session whose policy asks for the next replica count; the production
``ElasticLauncher`` reads what the ranks leave in the checkpoint folder and
relaunches at the new size, where DCP reshards. A rank SIGKILLed mid-save and
another mid-load (the two halves of a reshard) must cost nothing but time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.runtime.checkpoint import complete_steps
from greentrain.runtime.elastic import ESTIMATE_FILE, ReplicaState
from greentrain.runtime.relaunch import ElasticLauncher

from .elastic_ranks import MICRO, elastic_rank
from .harness import run_ranks, tiny_config
from .layouts import LOSS_ATOL, NORM_RTOL

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.slow]

STEPS = 5
SCHEDULE = {1: 2, 2: 4, 3: 2}  # after step 1: 2 replicas, after 2: 4, after 3: back to 2


def _base(tmp_path: Path) -> dict:
    profile = tmp_path / "profile.csv"
    profile.write_text("replicas,throughput,power_w\n1,100,50\n2,190,100\n4,360,200\n", encoding="utf-8")
    cfg = tiny_config(train={"steps": STEPS, "grad_accum": 4}, parallel={"dp_shard": -1},
                      checkpoint={"dir": str(tmp_path / "ckpt"), "interval": 100},
                      greentrain={"zone": "GB", "scaling_profile": str(profile)})
    return cfg.to_dict()


def _fixed_run() -> list[tuple[float, float]]:
    from greentrain.runtime.trainer import Trainer

    cfg = tiny_config(train={"steps": STEPS, "grad_accum": 8 // MICRO}, parallel={"dp_shard": 1})
    return [(m.loss, m.grad_norm) for m in Trainer(cfg).fit()]


def _elastic_run(tmp_path: Path, faults: dict) -> tuple[ElasticLauncher, dict[int, tuple[float, float]], list[str]]:
    base = _base(tmp_path)
    trained: dict[int, tuple[float, float]] = {}
    notes: list[str] = []

    def launch(replicas: int) -> int:
        try:
            results = run_ranks(elastic_rank, replicas, base, SCHEDULE, faults, timeout_s=120)
        except AssertionError:  # a rank failed or was killed: what torchrun reports as a non-zero exit
            return 1
        for step, loss, norm in results[0]["history"]:
            trained[step] = (loss, norm)  # a replayed step replaces the lost one
        assert {r["grad_accum"] for r in results} == {8 // (replicas * MICRO)}, "accumulation absorbs the size"
        return 75 if results[0]["rescale_to"] is not None else 0

    launcher = ElasticLauncher(base["checkpoint"]["dir"], 1, launch, max_restarts=1, note=notes.append)
    assert launcher.run() == 0
    return launcher, trained, notes


def _assert_parity(trained: dict[int, tuple[float, float]], reference: list[tuple[float, float]]) -> None:
    assert sorted(trained) == list(range(1, STEPS + 1))
    for step, (ref_loss, ref_norm) in enumerate(reference, start=1):
        loss, norm = trained[step]
        assert abs(loss - ref_loss) <= LOSS_ATOL, f"step {step}: loss {loss!r} != fixed-size {ref_loss!r}"
        assert abs(norm - ref_norm) <= NORM_RTOL * abs(ref_norm), f"step {step}: grad norm {norm!r} != {ref_norm!r}"


@pytest.mark.timeout(300)
def test_world_size_schedule_has_loss_parity_with_a_fixed_size_run(tmp_path: Path) -> None:
    launcher, trained, notes = _elastic_run(tmp_path, faults={})
    assert [size for size, _ in launcher.launches] == [1, 2, 4, 2]
    _assert_parity(trained, _fixed_run())
    state = ReplicaState.load(tmp_path / "ckpt")
    assert state is not None and state.changes == 3 and state.failed == [] and state.working == 2
    assert (tmp_path / "ckpt" / ESTIMATE_FILE).is_file()
    assert [n.split(" at step")[0] for n in notes] == ["replicas 1 -> 2", "replicas 2 -> 4", "replicas 4 -> 2"]
    assert [n.split("(")[0].split(" at step ")[1] for n in notes] == ["1 ", "2 ", "3 "]


@pytest.mark.timeout(300)
def test_killed_mid_reshard_resumes_and_a_failed_size_falls_back(tmp_path: Path) -> None:
    # Rank 1 is SIGKILLed while saving the 2 -> 4 checkpoint (step 2): the half-written step-2 never counts;
    # the restart at 2 (which had trained) resumes from step 1 and replays. Later rank 1 is SIGKILLed while
    # loading at the 4 -> 2 relaunch: that launch fails before training, so the launcher falls back to 4 (the
    # last count that trained; 2 is not planned again), which resumes from the step-3 checkpoint, kept whole.
    faults = {"kill_save": {"world": 2, "rank": 1, "step": 2, "marker": str(tmp_path / "save.fired")},
              "kill_load": {"world": 2, "rank": 1, "after": 3, "marker": str(tmp_path / "load.fired")}}
    launcher, trained, notes = _elastic_run(tmp_path, faults)
    assert (tmp_path / "save.fired").exists() and (tmp_path / "load.fired").exists()
    assert launcher.launches == [(1, 75), (2, 1), (2, 75), (4, 75), (2, 1), (4, 0)]
    _assert_parity(trained, _fixed_run())
    fallback = [n for n in notes if "falling back" in n]
    assert len(fallback) == 1 and "relaunch at 2 replicas failed" in fallback[0]
    assert "newest complete checkpoint (step 3)" in fallback[0]
    state = ReplicaState.load(tmp_path / "ckpt")
    assert state is not None and state.failed == [2] and state.working == 4
    assert not list((tmp_path / "ckpt").glob("*.corrupt*")), "a lost rank must not set a good checkpoint aside"
    assert STEPS in complete_steps(tmp_path / "ckpt")
