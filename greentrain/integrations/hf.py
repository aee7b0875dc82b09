"""Hugging Face Trainer: carbon-aware training in one line.

```python
from greentrain.integrations.hf import GreenTrainCallback, train

trainer = Trainer(model=model, args=args, train_dataset=ds,
                  callbacks=[GreenTrainCallback(policy="carbon-aware", zone="GB", deadline="+12")])
train(trainer)   # = trainer.train(), then wait out each pause and resume from its checkpoint
```

Each optimizer step is measured; decisions apply at ``on_step_end``. A pause
in checkpoint mode sets ``should_save`` and ``should_training_stop``: the
Trainer writes ``checkpoint-N`` and returns. ``train(trainer)`` then waits
for the planned time and calls ``trainer.train(resume_from_checkpoint=True)``;
under a scheduler call ``callback.exit_for_requeue()`` instead (exit status 75)
and relaunch with ``resume_from_checkpoint=True``. ``pause_mode="suspend"``
waits inside the step instead. The job's deadline and totals are saved in
each checkpoint (``greentrain-state.json``), so a resumed job plans its rest.
Under DDP every rank gets rank 0's decision at the same step. The callback
starts no CodeCarbon tracker of its own, so Transformers' ``CodeCarbonCallback``
(``report_to=["codecarbon"]``) can run beside it; ``report_to=[]`` works too.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from greentrain.extras import require

require("transformers", "greentrain.integrations.hf")
from torch import Tensor
from torch.nn import Module
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from greentrain.job.state import STATE_FILE_NAME
from greentrain.integrations.driver import (
    PAUSED_EXIT_CODE,
    CallbackKeywords,
    DriverStatus,
    StepDriver,
    callback_job,
)
from greentrain.job.options import PolicySpec

if TYPE_CHECKING:
    import torch
    from torch.utils.hooks import RemovableHandle
    from transformers.trainer_utils import TrainOutput

    from greentrain.engine import Engine
    from greentrain.job.state import EngineState

__all__ = ["GreenTrainCallback", "train", "STATE_FILE"]

STATE_FILE = STATE_FILE_NAME
"""Written into every ``checkpoint-N`` directory the Trainer saves (``greentrain.job.state.STATE_FILE_NAME``)."""


class GreenTrainCallback(DriverStatus, TrainerCallback):
    """Drives greentrain's engine from the Trainer's step boundaries.

    Args: the fields of ``greentrain.job.JobOptions`` (as ``Session``: ``policy``, ``zone``, ``provider``,
    ``deadline``, ``pause_mode`` ('checkpoint' | 'suspend'), ``power``, ``precision``, ...) and the parts
    ``clock``, ``devices``, ``actuators``, ``monitor``. With ``precision=`` each optimizer step runs under
    the current precision's autocast and the model's forward loss feeds the trial's loss guard.
    """

    def __init__(self, policy: PolicySpec | None = None, /, **keywords: Unpack[CallbackKeywords]) -> None:
        self.options, parts = callback_job(policy, **keywords)
        self.driver = StepDriver(self.options, parts)
        self.pauses = 0
        """Checkpoint pauses so far in this process."""
        self._tokens_seen = 0
        self._tokens_counted = 0
        """Input tokens the model's training forwards took since the last step (when the Trainer counts none)."""
        self._losses: list[Tensor] = []
        self._loss_hook: RemovableHandle | None = None
        self._token_hook: RemovableHandle | None = None

    @property
    def engine(self) -> Engine | None:
        """The live ``greentrain.engine.Engine`` (None outside training)."""
        return self.driver.engine

    # ---- Trainer events ----------------------------------------------------------------------

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: object) -> None:
        prior = _load_prior(_checkpoint(args, state) / STATE_FILE, self.options.job) if state.global_step else None
        self.driver.open(steps_total=state.max_steps or None, steps_done=state.global_step, prior=prior)
        self._tokens_seen = state.num_input_tokens_seen or 0
        model = kwargs.get("model")
        if not isinstance(model, Module):  # the Trainer passes its (torch) model
            return
        if self.options.precision is not None and self._loss_hook is None:
            # The Trainer hands callbacks no loss; the precision trial's loss guard needs each step's.
            self._loss_hook = model.register_forward_hook(self._record_loss)
        if self._token_hook is None:
            # The Trainer counts tokens only with include_num_input_tokens_seen; the run log needs them anyway.
            self._token_hook = model.register_forward_pre_hook(self._count_tokens, with_kwargs=True)

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                      **kwargs: object) -> None:
        self._losses.clear()  # an evaluation between steps is not this step's loss
        self.driver.step_begin(autocast=True)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: object) -> None:
        seen = state.num_input_tokens_seen or 0
        tokens, self._tokens_seen = max(0, seen - self._tokens_seen), seen
        counted, self._tokens_counted = self._tokens_counted, 0
        tokens = tokens or counted  # the Trainer's own count when it keeps one
        loss = _mean(self._losses)  # over the step's micro-batches: one device sync per step
        stop = self.driver.step_end(tokens=tokens, loss=loss)
        if self.options.stop_signals:  # a signal may reach one rank only: stop if any rank must
            stop = _any_rank(stop, args.device)
            if stop and not self.driver.paused:
                self.driver.paused = self.driver.stopped_by_signal = True
        if stop:
            self.pauses += 1
            control.should_save = True
            control.should_training_stop = True

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: object) -> None:
        snapshot = self.driver.state()
        if snapshot is None or not args.should_save:  # rank 0 (process_index 0) writes
            return
        from greentrain.job.state import save_state

        folder = _checkpoint(args, state)
        if folder.is_dir():
            save_state(snapshot, folder / STATE_FILE)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: object) -> None:
        if not self.driver.paused:
            self.close()

    def _count_tokens(self, module: Module, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        if not module.training:
            return  # an evaluation forward is not training work
        ids = kwargs.get("input_ids", args[0] if args else None)
        if isinstance(ids, Tensor):
            self._tokens_counted += int(ids.numel())

    def _record_loss(self, module: Module, inputs: object, output: object) -> None:
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if module.training and loss is not None:
            self._losses.append(loss.detach())

    # ---- after a pause ----------------------------------------------------------------------

    def wait_for_resume(self) -> bool:
        """Block until the planned resume time (re-planning meanwhile); False if interrupted."""
        return self.driver.wait_for_resume()

    def close(self) -> None:
        """Restore hardware settings and stop helpers (``train`` does this for you)."""
        for hook in (self._loss_hook, self._token_hook):
            if hook is not None:
                hook.remove()
        self._loss_hook = self._token_hook = None
        self.driver.close()

    def exit_for_requeue(self) -> None:
        """Close and exit with status 75 so a scheduler (Slurm template, K8s) relaunches the job later."""
        self.close()
        sys.exit(PAUSED_EXIT_CODE)


def _checkpoint(args: TrainingArguments, state: TrainerState) -> Path:
    """The folder the Trainer saves this step's checkpoint in."""
    if args.output_dir is None:  # TrainingArguments fills in a default; only a hand-made one has none
        raise ValueError("TrainingArguments.output_dir is None; give the Trainer an output_dir")
    return Path(args.output_dir) / f"checkpoint-{state.global_step}"


def _mean(losses: list[Tensor]) -> float | None:
    if not losses:
        return None
    import torch

    return float(torch.stack([loss.float() for loss in losses]).mean())


def _any_rank(flag: bool, device: torch.device) -> bool:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    value = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def _load_prior(path: Path, job: str) -> EngineState | None:
    from greentrain.job.state import load_state

    return load_state(path, job) if path.exists() else None


class TrainKeywords(TypedDict, total=False):
    """``Trainer.train``'s keywords besides ``resume_from_checkpoint``."""

    trial: object
    """An optuna ``Trial`` or a dict of hyperparameters (a search's)."""
    ignore_keys_for_eval: list[str] | None


def train(trainer: Trainer, *, resume_from_checkpoint: str | bool | None = None,
          **kwargs: Unpack[TrainKeywords]) -> TrainOutput:
    """``trainer.train()`` that waits out checkpoint pauses and resumes from the saved checkpoint."""
    callback = next((c for c in trainer.callback_handler.callbacks if isinstance(c, GreenTrainCallback)), None)
    if callback is None:
        return trainer.train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
    try:
        result = trainer.train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        while callback.paused:
            if not callback.wait_for_resume():
                break  # interrupted: the checkpoint is saved, the next run resumes
            result = trainer.train(resume_from_checkpoint=True, **kwargs)
        return result
    finally:
        callback.close()
