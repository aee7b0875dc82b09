"""The Session's checkpoint: the user's save/load functions, or the default model+optimizer checkpoint.

The default checkpoint also carries the objects the user registered (``state=``, ``UserState``). Without an
optimizer it saves the model alone: a resume then restarts the optimizer's state (momentum, Adam's moments),
which is not the uninterrupted run, so that is said once, as a warning, at set-up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from greentrain.errors import ConfigError
from greentrain.job.rngstate import RNGState
from greentrain.engine.broadcast import Broadcast, barrier_for
from greentrain.job.modelcheckpoint import ModelCheckpoint
from greentrain.job.userstate import UserState

if TYPE_CHECKING:
    from torch.nn import Module
    from torch.optim import Optimizer

__all__ = ["JobCheckpoint", "NO_OPTIMIZER_WARNING"]

log = logging.getLogger("greentrain.session")

NO_OPTIMIZER_WARNING = ("greentrain: optimizer=None: the default checkpoint saves the model only, so a resumed run "
                        "restarts the optimizer's state and is not the uninterrupted run; pass optimizer= (or "
                        "register it in state=)")


class JobCheckpoint:
    """One interface over ``save(next_step)``/``load()`` callbacks or a ``ModelCheckpoint``."""

    def __init__(self, *, save: Callable[[int], None] | None, load: Callable[[], int | None] | None,
                 model: Module | None, optimizer: Optimizer | None, checkpoint_dir: str | Path | None,
                 state: Mapping[str, object] | None = None) -> None:
        if (save is None) != (load is None):
            raise ConfigError("save/load: pass both functions, or neither (then model= and checkpoint_dir=)")
        if model is not None and checkpoint_dir is None and save is None:
            raise ConfigError("checkpoint_dir: required with model= (where the default checkpoint is written)")
        self._user_state = UserState(state)
        if self._user_state and (save is not None or model is None):
            raise ConfigError("state: registered objects ride in the default checkpoint (model= and checkpoint_dir=); "
                              "with your own save/load, save them there")
        self._user_save, self._user_load = save, load
        self._model, self._optimizer, self._dir = model, optimizer, checkpoint_dir
        self._default: ModelCheckpoint | None = None

    @property
    def available(self) -> bool:
        """Whether a pause can checkpoint (user functions or a model to save)."""
        return self._user_save is not None or self._model is not None

    def setup(self, broadcast: Broadcast) -> None:
        """Build the default checkpoint (every rank saves its part; rank agreement via a barrier)."""
        if self._user_save is not None or self._model is None:
            return
        if self._optimizer is None and not any(hasattr(o, "param_groups") for o in self._user_state.objects.values()):
            if broadcast.is_leader:
                log.warning(NO_OPTIMIZER_WARNING)
        assert self._dir is not None  # __init__ refuses model= without checkpoint_dir=
        self._default = ModelCheckpoint(self._dir, self._model, self._optimizer, rank=broadcast.rank,
                                        barrier=barrier_for(broadcast), user_state=self._user_state)

    def load(self) -> int:
        """The step to resume at (0 when there is nothing to resume)."""
        if self._user_load is not None:
            step = self._user_load()
        elif self._default is not None:
            step = self._default.load()
        else:
            step = None
        if step is not None and (not isinstance(step, int) or step < 0):
            raise ConfigError(f"load(): must return the next step (an int >= 0) or None, got {step!r}")
        return step or 0

    def load_with_rng(self, rng_at_enter: RNGState) -> tuple[int, RNGState]:
        """``load()``, and the RNG state the first step must see (restore it after all other set-up).

        That is the state the load restored, or, when it restored none (a fresh job, or a ``load`` that
        keeps no RNG state), ``rng_at_enter``: either way the Session's own set-up leaves no trace.
        """
        before = RNGState.capture()
        step = self.load()
        after = RNGState.capture()
        return step, (rng_at_enter if after.same_as(before) else after)

    def save(self, next_step: int) -> None:
        if self._user_save is not None:
            self._user_save(next_step)
        elif self._default is not None:
            self._default.save(next_step)
