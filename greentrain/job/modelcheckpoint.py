"""Default checkpoint for the plain-loop Session: model + optimizer + step + RNG + the user's registered state.

Used when the user passes ``model=``/``optimizer=``/``checkpoint_dir=``
instead of their own save/load functions. Writes are atomic (temporary file,
then ``os.replace``) so a kill mid-save leaves the previous checkpoint intact;
rank 0 keeps everything of its own in that one file, so model, optimizer, RNG
and registered state always belong to the same step.
RNG states (Python, numpy, torch CPU and CUDA: ``RNGState``) and the registered
state (``UserState``) are saved per rank (other ranks in ``rng-rank<r>.pt``)
so a resumed run draws the same numbers as an uninterrupted one. In a multi-rank job rank 0 writes the
(replicated, DDP-style) model and optimizer; sharded models (FSDP) need the
user's own save/load (e.g. torch.distributed.checkpoint).
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from greentrain.errors import ConfigError
from greentrain.job.rngstate import RNGState
from greentrain.job.userstate import UserState

if TYPE_CHECKING:
    from torch.nn import Module
    from torch.optim import Optimizer

__all__ = ["ModelCheckpoint"]

_MODEL_FILE = "checkpoint.pt"


class ModelCheckpoint:
    """save(step) / load() -> step | None over a directory."""

    def __init__(self, directory: str | Path, model: Module, optimizer: Optimizer | None = None, *, rank: int = 0,
                 barrier: Callable[[], None] | None = None, user_state: UserState | None = None) -> None:
        self.directory = Path(directory)
        self.model = model
        self.optimizer = optimizer
        self.user_state = user_state or UserState()
        self.rank = rank
        self._barrier = barrier or (lambda: None)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"checkpoint_dir {self.directory}: cannot create ({e.strerror})") from None

    @property
    def path(self) -> Path:
        return self.directory / _MODEL_FILE

    def _rng_path(self) -> Path:
        return self.directory / f"rng-rank{self.rank}.pt"

    def _own_file(self) -> dict[str, Any] | None:
        """This rank's RNG and registered state from its own file (rank 0's, in checkpoints written before
        ``checkpoint.pt`` held them); None when there is none."""
        import torch

        if not self._rng_path().exists():
            return None
        data = torch.load(self._rng_path(), weights_only=False)
        return {"rng": data, "user": data.get("user")}

    def save(self, step: int) -> None:
        """Save everything needed to continue at ``step`` (the next step to run)."""

        own = {"rng": RNGState.capture(import_torch=True).to_dict(), "user": self.user_state.state_dict()}
        if self.rank == 0:
            state = {"step": int(step), "model": self.model.state_dict(), **own}
            if self.optimizer is not None:
                state["optimizer"] = self.optimizer.state_dict()
            _atomic_save(state, self.path)
        else:
            _atomic_save({**own["rng"], "user": own["user"], "step": int(step)}, self._rng_path())
        self._barrier()

    def load(self) -> int | None:
        """Restore model, optimizer and RNG; the step to resume at, or None if there is no checkpoint."""
        import torch

        if not self.path.exists():
            return None
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=False)
            self.model.load_state_dict(state["model"])
            if self.optimizer is not None and "optimizer" in state:
                self.optimizer.load_state_dict(state["optimizer"])
            own: dict[str, Any] | None = state if self.rank == 0 and "rng" in state else self._own_file()
            if own is not None and own.get("rng") is not None:
                RNGState.from_dict(own["rng"]).restore()
            if self.user_state:
                self.user_state.load_state_dict((own or {}).get("user"))
        except Exception as e:  # truncated or garbage file: pickle, EOF, zip and torch errors alike, one line
            first = next((line for line in str(e).splitlines() if line.strip()), "")[:200]
            raise ConfigError(f"{self.path}: cannot restore checkpoint ({type(e).__name__}: {first}); "
                              "move it aside to start afresh") from None
        return int(state["step"])


def _atomic_save(obj: dict[str, object], path: Path) -> None:
    import torch

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)
