"""The job's state moves with its checkpoints (greentrain.job.commit) and a deadline given again on a restart
replaces the stored one (greentrain.job.build.resolve_deadline)."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta

import pytest

from greentrain.job.build import resolve_deadline
from greentrain.job.commit import deferred_interrupt, interrupt_line, reconcile, settle
from greentrain.job.state import EngineState, deadline_spec

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def state(**fields: object) -> EngineState:
    return EngineState(job="j", **fields)  # type: ignore[arg-type]


def test_a_checkpointed_state_is_written_as_it_is() -> None:
    committed = state(steps_done=10, energy_j=100.0, lost_steps=3, lost_energy_j=30.0)
    current = state(steps_done=10, energy_j=120.0, running_s=50.0)  # a pause's waiting draw since the checkpoint
    assert settle(current, committed) == state(steps_done=10, energy_j=120.0, running_s=50.0, lost_steps=3,
                                               lost_energy_j=30.0)


def test_work_since_the_last_checkpoint_is_lost_not_progress() -> None:
    committed = state(steps_done=10, running_s=100.0, tokens=320, energy_j=100.0, emissions_g=5.0,
                      counterfactual_g=8.0)
    current = state(steps_done=25, running_s=250.0, tokens=800, energy_j=250.0, emissions_g=12.0,
                    counterfactual_g=20.0, step_time_s=10.0)
    saved = settle(current, committed)
    assert (saved.steps_done, saved.running_s, saved.tokens, saved.counterfactual_g) == (10, 100.0, 320, 8.0)
    assert (saved.lost_steps, saved.lost_energy_j) == (15, 150.0)
    assert (saved.energy_j, saved.emissions_g, saved.step_time_s) == (250.0, 12.0, 10.0), "spent is spent"


def test_nothing_checkpointed_means_step_zero() -> None:
    saved = settle(state(steps_done=20, energy_j=80.0, tokens=640), None)
    assert (saved.steps_done, saved.tokens, saved.lost_steps, saved.lost_energy_j) == (0, 0, 20, 80.0)
    finished = settle(state(steps_done=20, finished=True), None)
    assert finished.steps_done == 20 and finished.lost_steps == 0


def test_a_state_ahead_of_its_checkpoint_is_corrected_with_one_line() -> None:
    stale = state(steps_done=20, running_s=200.0, tokens=640, energy_j=100.0, counterfactual_g=10.0)
    fixed, line = reconcile(stale, 0)
    assert fixed is not None and (fixed.steps_done, fixed.tokens, fixed.running_s, fixed.lost_steps) == (0, 0, 0.0, 20)
    assert fixed.lost_energy_j == pytest.approx(100.0) and fixed.counterfactual_g == 0.0
    assert line == ("greentrain: the job's state says 20 steps done but there is no checkpoint: 20 steps are "
                    "redone and their energy counted as lost")
    assert reconcile(stale, 20) == (stale, None)
    assert reconcile(stale, 25)[0] == state(steps_done=25, running_s=200.0, tokens=640, energy_j=100.0,
                                            counterfactual_g=10.0), "a checkpoint ahead of the state: its steps count"
    assert reconcile(None, 5) == (None, None)


def test_the_interrupt_line() -> None:
    assert interrupt_line(20, 0, 1500.0).startswith(
        "greentrain: interrupted at step 20; the next start resumes at step 0: 20 steps since the last checkpoint "
        "lost, 1.50 kJ")
    assert interrupt_line(40, 40, None).endswith("resumes at step 40: nothing lost")


def test_ctrl_c_waits_for_the_block_then_arrives() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("checkpoint")  # still runs: the interrupt is held
            done.append("state")
    assert done == ["checkpoint", "state"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with deferred_interrupt():
        done.append("quiet")  # no interrupt: nothing raised
    assert done[-1] == "quiet"


def test_a_deadline_given_again_keeps_the_stored_one_another_replaces_it() -> None:
    stored = T0 + timedelta(hours=12)
    prior = state(deadline=stored.isoformat(), deadline_given="+12")
    later = T0 + timedelta(hours=5)
    assert resolve_deadline("+12", prior, later) == stored, "the relaunch's own command line"
    assert resolve_deadline(None, prior, later) == stored
    assert resolve_deadline("+48", prior, later) == later + timedelta(hours=48), "given anew: from now"
    at = T0 + timedelta(days=3)
    assert resolve_deadline(at, prior, later) == at
    legacy = state(deadline=stored.isoformat())  # written before deadline_given was kept
    assert resolve_deadline("+48", legacy, later) == stored
    assert deadline_spec(" +12 ") == "+12" and deadline_spec(at) == at.isoformat() and deadline_spec(None) is None


def test_lost_work_a_later_checkpoint_holds_is_progress_again() -> None:
    committed = state(steps_done=10, running_s=100.0, tokens=100, energy_j=100.0, counterfactual_g=10.0)
    current = state(steps_done=30, running_s=300.0, tokens=300, energy_j=300.0, counterfactual_g=30.0)
    saved = settle(current, committed)
    assert saved.lost_steps == 20 and saved.uncommitted is not None
    whole, line = reconcile(saved, 30)  # the program had saved all 30 steps on its own
    assert line is None and whole is not None
    assert (whole.steps_done, whole.running_s, whole.tokens, whole.counterfactual_g) == (30, 300.0, 300, 30.0)
    assert (whole.lost_steps, whole.lost_energy_j, whole.uncommitted) == (0, 0.0, None)
    half, _ = reconcile(saved, 20)  # its checkpoint holds half of them
    assert half is not None and (half.steps_done, half.tokens, half.lost_steps) == (20, 200, 10)
    assert half.lost_energy_j == pytest.approx(100.0) and half.counterfactual_g == pytest.approx(20.0)
    killed, _ = reconcile(committed, 12)  # killed between checkpoint and state: its steps count
    assert killed is not None and killed.steps_done == 12 and killed.lost_steps == 0
