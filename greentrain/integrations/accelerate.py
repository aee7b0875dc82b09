"""Hugging Face Accelerate: carbon-aware pauses for a hand-written training loop.

```python
from greentrain.integrations.accelerate import GreenAccelerate

green = GreenAccelerate(accelerator, policy="carbon-aware", zone="GB", deadline="+12", checkpoint_dir="ckpt")
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
start = green.begin(steps_total=1000)          # loads ckpt/ if a pause left one; waits out a delayed start
for step, batch in enumerate(accelerator.skip_first_batches(loader, start), start=start):
    ...forward, backward, optimizer.step()...
    if green.step(loss=loss):                  # paused: every rank saved the state; leave the loop
        break
green.end()                                    # paused? wait and return True to go round again (or exit 75)
```

A pause is raised with ``accelerator.set_trigger()`` on the rank that decided
and agreed with ``accelerator.check_trigger()`` on all ranks, so they stop at
the same step; the state is written with ``accelerator.save_state`` (model,
optimizer, scheduler, RNG, and this helper's own progress, registered with
``register_for_checkpointing``) and read back with ``accelerator.load_state``.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from greentrain.integrations.driver import PAUSED_EXIT_CODE, CallbackKeywords, StepDriver, callback_job, saved_prior
from greentrain.job.options import PolicySpec

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from accelerate import Accelerator

    from greentrain.engine.collaborators import Loss
    from greentrain.job.state import EngineState

__all__ = ["GreenAccelerate"]


class GreenAccelerate:
    """Engine driver for an Accelerate loop (arguments after ``accelerator``: the fields of
    ``greentrain.job.JobOptions`` and the parts ``clock``, ``devices``, ``actuators``, ``monitor``).
    With ``precision=``, run the forward pass in ``with green.autocast():`` and pass ``loss=`` to ``step``.

    ``checkpoint_dir`` (the job's setting; required here): where the pause checkpoint and the job's state
    file go. ``after_pause``: 'wait' (``end`` waits,
    returns True: run the loop again) or 'exit' (``end`` exits with status 75 for a scheduler to relaunch).
    """

    def __init__(self, accelerator: Accelerator, policy: PolicySpec | None = None, /, *, after_pause: str = "wait",
                 **keywords: Unpack[CallbackKeywords]) -> None:
        checkpoint_dir = keywords.get("checkpoint_dir")
        if checkpoint_dir is None:
            raise TypeError("GreenAccelerate() missing 1 required keyword-only argument: 'checkpoint_dir'")
        if after_pause not in ("wait", "exit"):
            from greentrain.errors import ConfigError

            raise ConfigError(f"after_pause: {after_pause!r} is not 'wait' or 'exit'")
        self.accelerator = accelerator
        self.checkpoint_dir = Path(checkpoint_dir)
        self.after_pause = after_pause
        self.options, parts = callback_job(policy, **keywords)
        self.driver = StepDriver(self.options, parts)
        self.next_step = 0
        """The step the loop should run next (restored from the checkpoint)."""
        self._prior: EngineState | None = None
        accelerator.register_for_checkpointing(self)

    @property
    def precision(self) -> str | None:
        """The precision in use, or None without ``precision=`` (trialled by measured energy per step)."""
        return self.driver.precision

    def autocast(self) -> AbstractContextManager[None]:
        """Context for your forward pass at the current precision (a no-op without ``precision=``)."""
        return self.driver.autocast()

    @property
    def paused(self) -> bool:
        """The loop was left because the policy paused the job."""
        return self.driver.paused

    def begin(self, steps_total: int | None) -> int:
        """Load the pause checkpoint if there is one, start the engine; returns the step to start at."""
        if (self.checkpoint_dir / "greentrain.json").exists():
            self.accelerator.load_state(str(self.checkpoint_dir))  # calls our load_state_dict too
        self.driver.open(steps_total=steps_total, steps_done=self.next_step, prior=self._prior)
        self._prior = None
        self.driver.step_begin()
        return self.next_step

    def step(self, tokens: int = 0, loss: Loss = None) -> bool:
        """Close one optimizer step; True when paused (state saved on every rank): break the loop."""
        self.next_step += 1
        if self.driver.step_end(tokens=tokens, loss=_scalar(loss)):
            self.accelerator.set_trigger()
        if self.accelerator.check_trigger():
            if not self.driver.paused:  # another rank got a stop signal
                self.driver.paused = self.driver.stopped_by_signal = True
            self.accelerator.save_state(str(self.checkpoint_dir))
            if self.accelerator.is_main_process:
                (self.checkpoint_dir / "greentrain.json").write_text('{"paused": true}\n', encoding="utf-8")
            return True
        self.driver.step_begin()
        return False

    def end(self) -> bool:
        """After the loop: True means 'paused, waited, run the loop again from ``begin``'."""
        if not self.driver.paused:
            if self.accelerator.is_main_process:  # done: a later run must not resume this job
                (self.checkpoint_dir / "greentrain.json").unlink(missing_ok=True)
            self.driver.close()
            return False
        if self.after_pause == "exit" or self.driver.stopped_by_signal:
            self.driver.close()
            if self.after_pause == "exit":
                sys.exit(PAUSED_EXIT_CODE)
            return False  # stopped from outside: the checkpoint is saved, the scheduler relaunches
        if not self.driver.wait_for_resume():
            self.driver.close()
            return False
        return True

    def close(self) -> None:
        """Restore hardware settings and stop helpers."""
        self.driver.close()

    # ---- registered with accelerator.register_for_checkpointing ------------------------------

    def state_dict(self) -> dict[str, object]:
        state = self.driver.state()
        return {"next_step": self.next_step, "engine": asdict(state) if state is not None else None}

    def load_state_dict(self, state_dict: dict[str, object]) -> None:
        next_step = state_dict.get("next_step", 0)
        self.next_step = next_step if isinstance(next_step, int) else 0
        self._prior = saved_prior(state_dict.get("engine"))


def _scalar(loss: Loss) -> Loss:
    from torch import Tensor

    try:
        return float(loss.detach()) if isinstance(loss, Tensor) else loss
    except (TypeError, ValueError, RuntimeError):
        return None
