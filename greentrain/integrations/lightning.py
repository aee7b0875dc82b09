"""PyTorch Lightning: carbon-aware training in one line.

```python
from greentrain.integrations.lightning import GreenTrainCallback, fit

green = GreenTrainCallback(policy="carbon-aware", zone="GB", deadline="+12")
trainer = L.Trainer(max_steps=10_000, callbacks=[green])
fit(trainer, model, datamodule=dm)   # = trainer.fit(), then wait out each pause and resume from its checkpoint
```

Decisions apply in ``on_train_batch_end``, agreed across ranks with the
strategy's ``reduce_boolean_decision`` (rank 0 decides; the engine broadcasts,
and the reduction makes sure no rank stops alone). A checkpoint-mode pause
saves ``greentrain-pause.ckpt`` in the trainer's root dir and sets
``trainer.should_stop``; resume with ``trainer.fit(..., ckpt_path=green.pause_checkpoint)``
(``fit`` does it after waiting), or ``green.exit_for_requeue()`` under a
scheduler. The callback's own state (deadline, totals so far, the pause)
travels inside every checkpoint through ``state_dict``/``load_state_dict``.

A pause usually falls mid-epoch. Lightning resumes mid-epoch exactly only when
the train dataloader is stateful; wrap a plain ``DataLoader`` (deterministic
order: ``shuffle=False`` or a seeded generator) in ``ResumableLoader``, or use
torchdata's ``StatefulDataLoader``. Otherwise the epoch's data restarts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from greentrain.extras import require

require("lightning", "greentrain.integrations.lightning")
from lightning.pytorch.callbacks import Callback
from torch import Tensor

from greentrain.integrations.driver import (
    PAUSED_EXIT_CODE,
    CallbackKeywords,
    DriverStatus,
    StepDriver,
    callback_job,
    saved_prior,
)
from greentrain.job.options import PolicySpec

if TYPE_CHECKING:
    from lightning.pytorch import LightningDataModule, LightningModule, Trainer
    from lightning.pytorch.utilities.types import EVAL_DATALOADERS, STEP_OUTPUT, TRAIN_DATALOADERS
    from torch.utils.data import DataLoader

    from greentrain.job.state import EngineState

__all__ = ["GreenTrainCallback", "ResumableLoader", "fit", "PAUSE_CHECKPOINT"]

PAUSE_CHECKPOINT = "greentrain-pause.ckpt"


class GreenTrainCallback(DriverStatus, Callback):
    """Drives greentrain's engine from Lightning's batch boundaries.

    Arguments: the fields of ``greentrain.job.JobOptions`` (as ``Session``, ``power`` and ``precision``
    included) and the parts ``clock``, ``devices``, ``actuators``, ``monitor``. ``checkpoint_dir`` (the job's
    setting) is where the pause checkpoint and the job's state file go (default: the trainer's root dir for
    the checkpoint, no state file).
    """

    def __init__(self, policy: PolicySpec | None = None, /, **keywords: Unpack[CallbackKeywords]) -> None:
        self.options, parts = callback_job(policy, **keywords)
        self.driver = StepDriver(self.options, parts)
        folder = self.options.checkpoint_dir
        self.checkpoint_dir = Path(folder) if folder is not None else None
        self.pause_checkpoint: Path | None = None
        """The checkpoint the last pause wrote (resume with ``ckpt_path=``)."""
        self.pauses = 0
        self._prior: EngineState | None = None

    # ---- Lightning events --------------------------------------------------------------------

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        steps_total = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None
        if steps_total is None:
            steps_total = int(trainer.estimated_stepping_batches)
        self.driver.open(steps_total=steps_total, steps_done=trainer.global_step, prior=self._prior)
        self._prior = None

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: object, batch_idx: int) -> None:
        self.driver.step_begin(autocast=True)  # with precision=: the step runs at the current precision

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: STEP_OUTPUT, batch: object,
                           batch_idx: int) -> None:
        pause = self.driver.step_end(loss=_loss(outputs))
        # Every rank already holds rank 0's decision; the reduction guarantees no rank stops alone.
        pause = bool(trainer.strategy.reduce_boolean_decision(pause, all=False))
        if not pause:
            return
        self.pauses += 1
        if not self.driver.paused:  # another rank got a stop signal: stop with it
            self.driver.paused = self.driver.stopped_by_signal = True
        path = (self.checkpoint_dir or Path(trainer.default_root_dir)) / PAUSE_CHECKPOINT
        trainer.save_checkpoint(path)
        self.pause_checkpoint = path
        trainer.should_stop = True

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not self.driver.paused:
            self.driver.close()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        self.driver.close()  # restore hardware settings on every exit path

    def state_dict(self) -> dict[str, object]:
        """The job's deadline and totals, saved inside each checkpoint."""
        state = self.driver.state()
        return {"engine": asdict(state) if state is not None else None, "pauses": self.pauses}

    def load_state_dict(self, state_dict: dict[str, object]) -> None:
        """Restore the job's deadline and totals from a checkpoint (before ``on_train_start``)."""
        pauses = state_dict.get("pauses", 0)
        self.pauses = pauses if isinstance(pauses, int) else 0
        self._prior = saved_prior(state_dict.get("engine"))

    # ---- after a pause ----------------------------------------------------------------------

    def wait_for_resume(self) -> bool:
        """Block until the planned resume time (re-planning meanwhile); False if interrupted."""
        return self.driver.wait_for_resume()

    def close(self) -> None:
        """Restore hardware settings and stop helpers (``fit`` does this for you)."""
        self.driver.close()

    def exit_for_requeue(self) -> None:
        """Close and exit with status 75 so a scheduler relaunches the job (resume from ``PAUSE_CHECKPOINT``)."""
        self.close()
        sys.exit(PAUSED_EXIT_CODE)


class ResumableLoader:
    """A batch iterable whose position survives a Lightning checkpoint (resume at the next batch).

    Lightning saves ``state_dict()`` with the checkpoint and calls ``load_state_dict`` on
    resume; the next epoch iteration then skips the batches already trained on. The
    wrapped loader must yield the same order again (no unseeded shuffling).
    """

    def __init__(self, loader: DataLoader) -> None:
        self.loader = loader
        self._served = 0
        self._skip = 0

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[object]:
        skip, self._skip = self._skip, 0
        self._served = 0
        for index, batch in enumerate(self.loader):
            if index < skip:
                self._served += 1
                continue  # trained on before the pause
            self._served += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        """Batches of the current epoch handed out so far."""
        return {"batches_served": self._served}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        """Skip that many batches at the start of the next iteration."""
        self._skip = int(state_dict.get("batches_served", 0))


def _loss(outputs: STEP_OUTPUT) -> float | None:
    loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
    if not isinstance(loss, Tensor):
        return None
    try:
        return float(loss.detach())
    except (TypeError, ValueError, RuntimeError):
        return None


class FitKeywords(TypedDict, total=False):
    """``Trainer.fit``'s keywords besides its data and ``ckpt_path`` (lightning 2.5 added ``weights_only``)."""

    weights_only: bool | None


def fit(trainer: Trainer, model: LightningModule, train_dataloaders: TRAIN_DATALOADERS | LightningDataModule = None,
        val_dataloaders: EVAL_DATALOADERS = None, datamodule: LightningDataModule | None = None, *,
        ckpt_path: str | Path | None = None, **kwargs: Unpack[FitKeywords]) -> None:
    """``trainer.fit()`` that waits out checkpoint pauses and resumes from the pause checkpoint."""

    def run(ckpt: str | Path | None) -> None:
        trainer.fit(model, train_dataloaders, val_dataloaders, datamodule, ckpt_path=ckpt, **kwargs)

    # Lightning's callback connector sets Trainer.callbacks in __init__; the class does not declare it.
    callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]
    green = next((c for c in callbacks if isinstance(c, GreenTrainCallback)), None)
    if green is None:
        run(ckpt_path)
        return
    try:
        run(ckpt_path)
        while green.paused and green.wait_for_resume():
            trainer.should_stop = False
            run(green.pause_checkpoint)
    finally:
        green.close()
