"""Resumes are bit-identical with Python's random, numpy and torch all drawn from in the loop.

Each lifetime is a fresh process (imports happen again, as after a real
relaunch), so a stream shifted by the Session's own set-up shows up here;
in-process loops cannot see it because the modules are imported already.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from gt_resume_job import run_job  # noqa: E402

from greentrain.job.checkpoint import JobCheckpoint
from greentrain.job.rngstate import RNGState

STEPS = 14


@pytest.mark.timeout(290)
def test_resume_over_random_pause_points_is_bit_identical(tmp_path: Path) -> None:
    reference, lifetimes = run_job(tmp_path / "reference", STEPS, set())
    assert lifetimes == 1 and len(reference) == STEPS
    rng = random.Random(20261123)
    for run in range(2):
        pauses = set(rng.sample(range(1, STEPS - 1), 4))
        lines, lifetimes = run_job(tmp_path / f"paused-{run}", STEPS, pauses)
        assert lifetimes == len(pauses) + 1
        assert [int(line.split()[0]) for line in lines] == list(range(STEPS)), "each step once, in order"
        first = next((i for i, (a, b) in enumerate(zip(reference, lines)) if a != b), None)
        assert first is None, f"pauses {sorted(pauses)}: diverged at step {first}:\n{reference[first]}\n{lines[first]}"


def _draw() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_rng_state_round_trip_covers_every_stream() -> None:
    saved = RNGState.from_dict(RNGState.capture().to_dict())
    expected = _draw()
    _draw()
    assert not RNGState.capture().same_as(saved)
    saved.restore()
    assert RNGState.capture().same_as(saved)
    assert _draw() == expected


def test_first_step_sees_the_loaded_state_or_else_the_state_at_enter(tmp_path: Path) -> None:
    at_enter = RNGState.capture()
    _draw()  # set-up before the load draws (imports, ...)
    keeps_none = JobCheckpoint(save=lambda step: None, load=lambda: 3, model=None, optimizer=None, checkpoint_dir=None)
    step, rng = keeps_none.load_with_rng(at_enter)
    assert step == 3 and rng is at_enter

    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    checkpointed = RNGState.capture()
    random.seed(6)

    def load() -> int:
        checkpointed.restore()
        return 7

    restores = JobCheckpoint(save=lambda step: None, load=load, model=None, optimizer=None, checkpoint_dir=None)
    step, rng = restores.load_with_rng(at_enter)
    assert step == 7 and rng.same_as(checkpointed)
