"""The script's own state rides in the checkpoint: a registered LR scheduler and a dict of counters come back
exactly, and an epoch/batch loop resumes mid-epoch with no batch repeated or skipped (issue 38, build 8)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from gt_engine_doubles import TraceSignals, hourly, varying  # noqa: E402
from gt_session_loop import PauseAtSteps, make_model, train_step  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.job.checkpoint import NO_OPTIMIZER_WARNING
from greentrain.job.epochs import EpochSampler, resume_epochs
from greentrain.session import Session

pytestmark = pytest.mark.timeout(90)

T0 = datetime(2022, 2, 1, 0, tzinfo=UTC)
STEP_S = 60.0


def lifetimes(tmp_path: Path, pauses: set[int], one: Callable[[dict[str, object]], Session]) -> int:
    """Call ``one`` (a process lifetime: fresh objects, one Session) until the job is finished."""
    clock = FrozenClock(T0)
    shared = {"clock": clock, "signals": TraceSignals(hourly(T0, varying(200, 200)), clock), "pauses": pauses,
              "ckpt": tmp_path / "ckpt"}
    count = 0
    while True:
        count += 1
        assert count <= len(pauses) + 2
        torch.manual_seed(777 + count)  # a new process does not share our RNG state
        if one(shared).finished:
            return count


def session_for(shared: dict[str, object], steps: int, **objects: object) -> Session:
    return Session(PauseAtSteps(shared["pauses"]), provider=shared["signals"], steps_total=steps,
                   checkpoint_dir=shared["ckpt"], clock=shared["clock"], relaunch="none", devices=False,
                   progress=False, decide_interval_s=1, step_time_s=STEP_S, **objects)


# ---- an LR scheduler and a dict of counters ----------------------------------------------------------------

STEPS = 30


def scheduled(model: torch.nn.Module, opt: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=STEPS + 1)


def reference_run() -> list[tuple[float, float, dict[str, float]]]:
    model, opt = make_model()
    sched, counters = scheduled(model, opt), {"seen": 0, "loss_sum": 0.0, "best": float("inf")}
    rows = []
    for step in range(STEPS):
        rows.append(one_step(model, opt, sched, counters, step))
    return rows


def one_step(model, opt, sched, counters: dict[str, float], step: int) -> tuple[float, float, dict[str, float]]:
    loss = train_step(model, opt, step).item()
    lr = sched.get_last_lr()[0]
    sched.step()
    counters["seen"] += 32
    counters["loss_sum"] += loss
    counters["best"] = min(counters["best"], loss)
    return loss, lr, dict(counters)


def test_a_registered_scheduler_and_counters_dict_resume_bit_identical(tmp_path: Path) -> None:
    rows: dict[int, list[tuple[float, float, dict[str, float]]]] = {}

    def one(shared: dict[str, object]) -> Session:
        model, opt = make_model()
        sched, counters = scheduled(model, opt), {"seen": 0, "loss_sum": 0.0, "best": float("inf")}
        with session_for(shared, STEPS, model=model, optimizer=opt,
                         state={"scheduler": sched, "counters": counters}) as session:
            for step in range(session.start_step, STEPS):
                rows.setdefault(step, []).append(one_step(model, opt, sched, counters, step))
                shared["clock"].advance(STEP_S)
                session.step(tokens=32)
                if session.should_stop:
                    break
        return session

    count = lifetimes(tmp_path, {7, 19}, one)
    assert count == 3, "two checkpoint pauses, three process lifetimes"
    assert sorted(rows) == list(range(STEPS)) and all(len(v) == 1 for v in rows.values())
    assert [rows[i][0] for i in range(STEPS)] == reference_run()  # losses, LRs and counters, exactly


# ---- an epoch/batch loop resumed mid-epoch ------------------------------------------------------------------

ITEMS, BATCH, EPOCHS = 60, 8, 3  # 8 batches per epoch, the last of 4


def loader_and_sampler() -> tuple[DataLoader, EpochSampler]:
    data = TensorDataset(torch.arange(ITEMS), torch.randn(ITEMS, 16, generator=torch.Generator().manual_seed(5)))
    sampler = EpochSampler(data)  # seed drawn from torch's generator: only the checkpoint brings it back
    return DataLoader(data, batch_size=BATCH, sampler=sampler), sampler


def test_an_epoch_batch_loop_resumes_mid_epoch_without_repeating_or_skipping(tmp_path: Path) -> None:
    torch.manual_seed(777)
    loader, _ = loader_and_sampler()
    expected = [(epoch, index, batch[0].tolist()) for epoch, index, batch in resume_epochs(loader, 0, EPOCHS)]
    steps = len(expected)
    assert steps == EPOCHS * 8
    seen: list[tuple[int, int, list[int]]] = []

    def one(shared: dict[str, object]) -> Session:
        torch.manual_seed(777)  # the sampler's seed is drawn the same way as the uninterrupted run's ...
        loader, sampler = loader_and_sampler()
        torch.manual_seed(len(seen) + 1)  # ... but the model's stream differs per lifetime, as in a new process
        model, opt = make_model()
        with session_for(shared, steps, model=model, optimizer=opt, state={"sampler": sampler}) as session:
            for epoch, index, (ids, _x) in resume_epochs(loader, session.start_step, EPOCHS):
                seen.append((epoch, index, ids.tolist()))
                shared["clock"].advance(STEP_S)
                session.step()
                if session.should_stop:
                    break
        return session

    count = lifetimes(tmp_path, {12, 19}, one)
    assert count == 3
    assert seen == expected, "every batch once, in the uninterrupted order"
    assert [(e, i) for e, i, _ in seen][12] == (1, 4), "the first resume is in the middle of epoch 1"


def test_the_sampler_seed_comes_from_the_checkpoint(tmp_path: Path) -> None:
    first: list[int] = []

    def one(shared: dict[str, object]) -> Session:
        loader, sampler = loader_and_sampler()  # a different seed each lifetime (see ``lifetimes``)
        model, opt = make_model()
        with session_for(shared, 16, model=model, optimizer=opt, state={"sampler": sampler}) as session:
            first.append(sampler.seed)
            for _epoch, _index, _batch in resume_epochs(loader, session.start_step, 2):
                shared["clock"].advance(STEP_S)
                session.step()
                if session.should_stop:
                    break
        return session

    assert lifetimes(tmp_path, {5}, one) == 2
    assert len(first) == 2 and first[0] == first[1]


# ---- optimizer=None ---------------------------------------------------------------------------------------


def test_no_optimizer_with_the_default_checkpoint_is_one_warning(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    model, _ = make_model()
    clock = FrozenClock(T0)
    with caplog.at_level(logging.WARNING, logger="greentrain"):
        with Session(PauseAtSteps(set()), steps_total=1, model=model, checkpoint_dir=tmp_path, clock=clock,
                     relaunch="none", devices=False, progress=False) as session:
            session.step()
    said = [r.getMessage() for r in caplog.records if "optimizer" in r.getMessage()]
    assert said == [NO_OPTIMIZER_WARNING] and "\n" not in said[0]
    assert said[0].startswith("greentrain: optimizer=None:")
