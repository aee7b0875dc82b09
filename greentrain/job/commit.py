"""The job's state moves with its checkpoints: checkpoint first, state after, both atomic.

A ``Session`` writes its state file (``greentrain.job.state``) right after each
complete checkpoint, with that checkpoint's progress: steps done, running
time, tokens and the run-now counterfactual. A process that ends without one
(Ctrl-C, an exception, a loop left early) writes the progress of the last
checkpoint (none: step 0) and counts what it did since as *lost*: its steps in
``lost_steps``, its energy in ``lost_energy_j`` (still in the job's energy and
emissions, which were spent, but not in the avoided grams, since run-now
would not have thrown the work away). A SIGKILL writes nothing, so the state
of the last checkpoint stands. A state file that claims more steps than the
checkpoint holds (written before this rule) is corrected the same way when the
job starts; one whose checkpoint holds more (a program that saves on its own,
``Session.saved``, or a kill between checkpoint and state) moves on to it, and
the lost work that checkpoint holds counts as progress again.

Ctrl-C while a checkpoint and its state are being written waits for both
(``deferred_interrupt``), so no pair is ever torn.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from greentrain.job.state import EngineState, deadline_spec, load_state, save_state, state_of

if TYPE_CHECKING:
    from greentrain.engine import Engine

__all__ = ["StateKeeper", "settle", "reconcile", "deferred_interrupt", "interrupt_line"]


def settle(current: EngineState, committed: EngineState | None) -> EngineState:
    """What to write for ``current``: itself when its progress is checkpointed (or the job finished); else the
    progress of ``committed`` (None: nothing checkpointed, step 0) with the work since counted as lost."""
    base = committed or EngineState(job=current.job)
    if current.finished or (committed is not None and current.steps_done == committed.steps_done):
        return replace(current, lost_steps=base.lost_steps, lost_energy_j=base.lost_energy_j, uncommitted=None)
    lost_j = max(0.0, current.energy_j - base.energy_j)
    return replace(
        current, steps_done=base.steps_done, running_s=base.running_s, tokens=base.tokens,
        counterfactual_g=base.counterfactual_g,
        lost_steps=base.lost_steps + max(0, current.steps_done - base.steps_done),
        lost_energy_j=base.lost_energy_j + lost_j,
        uncommitted={"steps_done": current.steps_done, "running_s": current.running_s, "tokens": current.tokens,
                     "counterfactual_g": current.counterfactual_g, "lost_energy_j": lost_j},
    )


def reconcile(prior: EngineState | None, start_step: int) -> tuple[EngineState | None, str | None]:
    """``prior`` made to agree with the checkpoint the job resumes at ``start_step``, and the one line that
    says so when it did not (a state file ahead of its checkpoint: those steps are redone, their share of
    the energy lost)."""
    if prior is None:
        return None, None
    if prior.steps_done <= start_step:
        return _recovered(prior, start_step), None
    kept = start_step / prior.steps_done
    extra = prior.steps_done - start_step
    fresh_j = max(0.0, prior.energy_j - prior.lost_energy_j)
    fixed = replace(prior, steps_done=start_step, running_s=prior.running_s * kept, tokens=int(prior.tokens * kept),
                    counterfactual_g=prior.counterfactual_g * kept, lost_steps=prior.lost_steps + extra,
                    lost_energy_j=prior.lost_energy_j + fresh_j * (1.0 - kept))
    where = f"the checkpoint resumes at step {start_step}" if start_step else "there is no checkpoint"
    return fixed, (f"greentrain: the job's state says {prior.steps_done} steps done but {where}: "
                   f"{extra} steps are redone and their energy counted as lost")


def interrupt_line(at_step: int, resume_step: int, lost_energy_j: float | None) -> str:
    """The one line Ctrl-C leaves: where the job stopped, where it resumes, what was lost (energy: None when
    not measured)."""
    from greentrain.units import format_energy_j

    lost = at_step - resume_step
    if lost <= 0:
        tail = "nothing lost"
    else:
        spent = f", {format_energy_j(lost_energy_j, with_wh=False)}" if lost_energy_j is not None else ""
        tail = f"{lost} step{'s' if lost != 1 else ''} since the last checkpoint lost{spent} (counted as lost energy)"
    return f"greentrain: interrupted at step {at_step}; the next start resumes at step {resume_step}: {tail}"


def _recovered(prior: EngineState, start_step: int) -> EngineState:
    """``prior`` moved on to a checkpoint at ``start_step`` (>= its steps): the program saved on its own, or
    was killed between its checkpoint and the state. The share of the last interrupted process's work that
    the checkpoint holds is progress again, no longer lost."""
    tail = prior.uncommitted or {}
    tail_steps = int(tail.get("steps_done", prior.steps_done)) - prior.steps_done
    ahead = start_step - prior.steps_done
    if ahead == 0 or tail_steps <= 0:
        return replace(prior, steps_done=start_step, uncommitted=None)
    share = min(1.0, ahead / tail_steps)

    def back(name: str, before: float) -> float:
        return (float(tail[name]) - float(before)) * share

    return replace(prior, steps_done=start_step, running_s=prior.running_s + back("running_s", prior.running_s),
                   tokens=prior.tokens + round(back("tokens", prior.tokens)),
                   counterfactual_g=prior.counterfactual_g + back("counterfactual_g", prior.counterfactual_g),
                   lost_steps=max(0, prior.lost_steps - min(ahead, tail_steps)),
                   lost_energy_j=max(0.0, prior.lost_energy_j - float(tail["lost_energy_j"]) * share),
                   uncommitted=None)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block is done, then deliver it as before; the main thread only (signal
    handlers live there; elsewhere the block runs as is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            if callable(previous):
                previous(signal.SIGINT, None)
            elif previous == signal.SIG_DFL:
                raise KeyboardInterrupt


class StateKeeper:
    """One job's state file as a Session keeps it: what the job resumes from, and each write (leader only)."""

    def __init__(self, path: Path | None, job: str, deadline: datetime | str | None) -> None:
        self.path = path
        self.job = job
        self._deadline_given = deadline_spec(deadline)
        self.committed: EngineState | None = None
        """The state of the last complete checkpoint (or the one the job resumed from)."""
        self.prior: EngineState | None = None

    def load(self) -> EngineState | None:
        """The previous run's state (None: a fresh job)."""
        self.prior = load_state(self.path, self.job) if self.path is not None else None
        if self.prior is not None and self._deadline_given is None:
            self._deadline_given = self.prior.deadline_given  # none given now: the stored one stands
        return self.prior

    def resume_at_step(self, start_step: int) -> tuple[EngineState | None, str | None]:
        """The prior state agreed with the checkpoint at ``start_step`` (see ``reconcile``); it is what a
        process that checkpoints nothing writes back."""
        self.prior, line = reconcile(self.prior, start_step)
        self.committed = self.prior
        return self.prior, line

    def capture(self, engine: Engine, *, resume_at: datetime | None, finished: bool) -> EngineState:
        """The engine's state now, settled against the last checkpoint."""
        current = state_of(engine, self.job, resume_at=resume_at, finished=finished,
                           deadline_given=self._deadline_given)
        return settle(current, self.committed)

    def commit(self, engine: Engine, *, resume_at: datetime | None) -> None:
        """A checkpoint is complete: its progress is the job's from now on; written at once."""
        current = state_of(engine, self.job, resume_at=resume_at, finished=False, deadline_given=self._deadline_given)
        before = self.committed or EngineState(job=self.job)
        self.committed = replace(current, lost_steps=before.lost_steps, lost_energy_j=before.lost_energy_j)
        self.write(self.committed, engine)

    def write(self, state: EngineState, engine: Engine) -> None:
        """Write ``state`` (rank 0 only), stamped with the job clock's now (later writes never go back)."""
        if self.path is None or not engine.is_leader:
            return
        save_state(replace(state, clock_at=engine.clock.now().isoformat()), self.path)

    def lost_since_commit(self, state: EngineState) -> tuple[int, float]:
        """Steps and joules ``state`` counts as lost beyond what the job had lost before this process."""
        before = self.prior or EngineState(job=self.job)
        return state.lost_steps - before.lost_steps, state.lost_energy_j - before.lost_energy_j
