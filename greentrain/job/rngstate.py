"""Every global random-number stream a training loop may draw from, captured and restored as one.

A resumed run is bit-identical only if each stream continues where the
checkpoint left it: Python's ``random``, numpy's global ``RandomState``,
torch's CPU generator and each CUDA device's. Restoring them is not enough on
its own: anything that runs afterwards and draws a number shifts a stream
(``rich`` calls ``random.getrandbits`` when it is imported, which building a
carbon signal does through httpx). So the Session captures the state the
checkpoint gave, and restores it once all of its own set-up is done, just
before the first step (see ``greentrain.session``).

numpy and torch are optional: a stream whose library is not installed (or,
for torch when capturing, not yet imported by anyone) is left out.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["RNGState", "RNGStateDict"]


def _numpy() -> ModuleType | None:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


class RNGStateDict(TypedDict, total=False):
    """``RNGState.to_dict``'s form in a checkpoint file (older files lack numpy and CUDA)."""

    python: tuple[object, ...] | None
    numpy: tuple[object, ...] | dict[str, object] | None
    torch: Tensor | None
    cuda: list[Tensor]


@dataclass(slots=True)
class RNGState:
    """A snapshot of the global RNG streams (None: that library was absent)."""

    python: tuple[object, ...] | None = None
    """``random.getstate()``."""
    numpy: tuple[object, ...] | dict[str, object] | None = None
    """``numpy.random.get_state()`` (the legacy global ``RandomState`` that ``np.random.*`` uses)."""
    torch_cpu: Tensor | None = None
    """``torch.get_rng_state()`` (a uint8 tensor)."""
    torch_cuda: list[Tensor] = field(default_factory=list)
    """``torch.cuda.get_rng_state_all()``, one per device, when CUDA was initialised."""

    @classmethod
    def capture(cls, *, import_torch: bool = False) -> RNGState:
        """The current state of every stream (torch only if imported already, unless ``import_torch``)."""
        state = cls(python=random.getstate())
        np = _numpy()
        if np is not None:
            state.numpy = np.random.get_state()
        torch = sys.modules.get("torch")
        if torch is None and import_torch:
            import torch
        if torch is not None:
            state.torch_cpu = torch.get_rng_state()
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                state.torch_cuda = list(torch.cuda.get_rng_state_all())
        return state

    def restore(self) -> None:
        """Put every captured stream back (CUDA states apply lazily if CUDA is not initialised yet)."""
        if self.python is not None:
            random.setstate(self.python)
        if self.numpy is not None:
            np = _numpy()
            if np is not None:
                np.random.set_state(self.numpy)
        if self.torch_cpu is not None:
            import torch

            torch.set_rng_state(self.torch_cpu)
            if self.torch_cuda and torch.cuda.is_available():
                count = min(len(self.torch_cuda), torch.cuda.device_count())  # a smaller node: the first devices
                for index in range(count):
                    torch.cuda.set_rng_state(self.torch_cuda[index], index)

    def same_as(self, other: RNGState) -> bool:
        """Whether both snapshots hold the same state in every stream."""
        if self.python != other.python:
            return False
        if (self.numpy is None) != (other.numpy is None):
            return False
        if self.numpy is not None and other.numpy is not None and not _numpy_states_equal(self.numpy, other.numpy):
            return False
        if (self.torch_cpu is None) != (other.torch_cpu is None) or len(self.torch_cuda) != len(other.torch_cuda):
            return False
        pairs = list(zip(self.torch_cuda, other.torch_cuda))
        if self.torch_cpu is not None and other.torch_cpu is not None:
            pairs.append((self.torch_cpu, other.torch_cpu))
        return all(bool((a == b).all()) and a.shape == b.shape for a, b in pairs)

    def to_dict(self) -> RNGStateDict:
        """A picklable form for a checkpoint file (``torch.save``)."""
        return {"python": self.python, "numpy": self.numpy, "torch": self.torch_cpu, "cuda": self.torch_cuda}

    @classmethod
    def from_dict(cls, data: RNGStateDict) -> RNGState:
        """Inverse of ``to_dict``; checkpoints written before numpy/CUDA were saved load too."""
        return cls(python=data.get("python"), numpy=data.get("numpy"), torch_cpu=data.get("torch"),
                   torch_cuda=list(data.get("cuda") or []))


def _numpy_states_equal(a: tuple[object, ...] | dict[str, object], b: tuple[object, ...] | dict[str, object]) -> bool:
    np = _numpy()
    if np is None:  # a numpy state is only ever captured with numpy installed
        return a == b
    if len(a) != len(b):
        return False
    return all(np.array_equal(x, y) if hasattr(x, "shape") else x == y for x, y in zip(a, b))
