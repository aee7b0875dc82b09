"""Registered user state (greentrain.job.userstate) and the epoch/batch helpers (greentrain.job.epochs)."""

from __future__ import annotations

import logging

import pytest
import torch

from greentrain.errors import ConfigError
from greentrain.job.checkpoint import JobCheckpoint
from greentrain.job.epochs import EpochSampler, epoch_position, resume_epochs
from greentrain.job.userstate import UserState


def test_a_dict_is_saved_by_value_and_restored_in_place() -> None:
    counters = {"seen": 3, "history": [1.0]}
    registry = UserState({"counters": counters})
    saved = registry.state_dict()
    counters["seen"] = 99
    counters["history"].append(2.0)
    assert saved == {"counters": {"seen": 3, "history": [1.0]}}, "a later change does not reach the checkpoint"
    registry.load_state_dict(saved)
    assert counters == {"seen": 3, "history": [1.0]}, "the loop's own reference sees the saved values"


def test_stateful_objects_go_through_their_methods() -> None:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    registry = UserState({"scheduler": sched})
    opt.step()
    sched.step()
    saved = registry.state_dict()
    opt.step()
    sched.step()
    registry.load_state_dict(saved)
    assert sched.last_epoch == 1


def test_bad_registrations_are_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^state\['x'\]: a int has no state_dict\(\)/load_state_dict\(\)"):
        UserState({"x": 3})
    with pytest.raises(ConfigError, match="^state: give a dict"):
        UserState([("x", {})])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="^state: registered objects ride in the default checkpoint"):
        JobCheckpoint(save=lambda s: None, load=lambda: None, model=None, optimizer=None, checkpoint_dir=None,
                      state={"c": {}})


def test_an_object_the_checkpoint_lacks_keeps_its_value(caplog: pytest.LogCaptureFixture) -> None:
    late = {"n": 1}
    with caplog.at_level(logging.WARNING, logger="greentrain"):
        UserState({"late": late}).load_state_dict({})
    assert late == {"n": 1}
    assert [r.getMessage() for r in caplog.records] == [
        "greentrain: state['late']: not in the checkpoint (registered after it was written); it starts from its "
        "current value"]


def test_epoch_position() -> None:
    assert epoch_position(0, 7) == (0, 0) and epoch_position(13, 7) == (1, 6) and epoch_position(14, 7) == (2, 0)
    with pytest.raises(ConfigError, match="^batches_per_epoch: must be > 0"):
        epoch_position(3, 0)


def test_the_sampler_order_depends_on_seed_and_epoch_only() -> None:
    a, b = EpochSampler(10, seed=4), EpochSampler(range(10), seed=4)
    a.set_epoch(2)
    b.set_epoch(2)
    assert list(a) == list(b) and sorted(a) == list(range(10))
    b.set_epoch(3)
    assert list(a) != list(b)
    restored = EpochSampler(10)
    restored.load_state_dict(a.state_dict())
    assert list(restored) == list(a)
    a.skip(4)
    assert list(a) == b.order(2)[4:] and list(a) == b.order(2), "a skip applies to one iteration"
    assert list(EpochSampler(5, shuffle=False)) == [0, 1, 2, 3, 4]


def test_resume_epochs_over_any_iterable() -> None:
    batches = ["a", "b", "c"]
    all_steps = list(resume_epochs(batches, 0, 2))
    assert all_steps == [(0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (1, 0, "a"), (1, 1, "b"), (1, 2, "c")]
    assert list(resume_epochs(batches, 4, 2)) == all_steps[4:]
    assert list(resume_epochs(batches, 6, 2)) == []
