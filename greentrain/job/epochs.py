"""Resume an epoch/batch loop in the middle of an epoch: no batch repeated, none skipped.

A loop over epochs and batches takes one global step per batch, ``step =
epoch * batches_per_epoch + batch``; after a pause ``session.start_step``
says which comes next, and ``epoch_position`` turns it into ``(epoch,
batch)``. The order of the batches must not depend on how long the process has
lived: ``EpochSampler`` shuffles each epoch with a generator seeded by
``(seed, epoch)`` alone, and its state (the seed, drawn once when not given)
rides in the checkpoint when registered (``Session(..., state={"sampler":
sampler})``). ``resume_epochs(loader, session.start_step, epochs)`` yields
``(epoch, batch_index, batch)`` from there on; with an ``EpochSampler`` under a
plain ``batch_size`` loader the consumed batches are skipped by index (their
data is never loaded), otherwise they are drawn and dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sized
from typing import Protocol, TypeVar, runtime_checkable

import torch
from torch.utils.data import Sampler

from greentrain.errors import ConfigError

__all__ = ["EpochSampler", "epoch_position", "resume_epochs"]

B = TypeVar("B")


def epoch_position(step: int, batches_per_epoch: int) -> tuple[int, int]:
    """``(epoch, batch)`` of global step ``step`` in a loop of ``batches_per_epoch`` batches per epoch."""
    if batches_per_epoch <= 0:
        raise ConfigError(f"batches_per_epoch: must be > 0, got {batches_per_epoch}")
    if step < 0:
        raise ConfigError(f"step: must be >= 0, got {step}")
    return divmod(step, batches_per_epoch)


class EpochSampler(Sampler[int]):
    """Indices ``0..n-1`` in an order fixed by ``(seed, epoch)``; ``set_epoch`` before each epoch.

    Args:
        data: the dataset (or its length).
        seed: the shuffling seed (None: drawn once from torch's generator; save it by registering the sampler).
        shuffle: False keeps the dataset's order (the skip on resume still applies).
    """

    def __init__(self, data: Sized | int, *, seed: int | None = None, shuffle: bool = True) -> None:
        self.length = data if isinstance(data, int) else len(data)
        self.seed = int(torch.empty((), dtype=torch.int64).random_().item()) if seed is None else int(seed)
        self.shuffle = shuffle
        self.epoch = 0
        self._start = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration yields."""
        self.epoch = int(epoch)

    def skip(self, count: int) -> None:
        """Leave out the first ``count`` indices of the next iteration only (the batches already consumed)."""
        self._start = max(0, int(count))

    def order(self, epoch: int) -> list[int]:
        """The whole order of ``epoch``."""
        if not self.shuffle:
            return list(range(self.length))
        generator = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(self.length, generator=generator).tolist()

    def __iter__(self) -> Iterator[int]:
        start, self._start = self._start, 0
        return iter(self.order(self.epoch)[start:])

    def __len__(self) -> int:
        return self.length

    def state_dict(self) -> dict[str, int]:
        return {"seed": self.seed, "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.seed, self.epoch = int(state["seed"]), int(state["epoch"])


@runtime_checkable
class _Sampled(Protocol):
    """A loader that draws through a sampler in batches (torch's ``DataLoader``)."""

    sampler: object
    batch_size: int | None


@runtime_checkable
class _SetsEpoch(Protocol):
    """A sampler that reshuffles per epoch (``EpochSampler``, torch's ``DistributedSampler``)."""

    def set_epoch(self, epoch: int) -> None: ...


def resume_epochs(loader: Iterable[B], start_step: int, epochs: int, *,
                  batches_per_epoch: int | None = None) -> Iterator[tuple[int, int, B]]:
    """``(epoch, batch_index, batch)`` for every global step from ``start_step`` to the end of ``epochs``.

    ``batches_per_epoch`` defaults to ``len(loader)``. A loader whose sampler has ``set_epoch`` (an
    ``EpochSampler``, torch's ``DistributedSampler``) is told each epoch before it is iterated.
    """
    per_epoch = batches_per_epoch if batches_per_epoch is not None else len(loader)  # type: ignore[arg-type]
    first_epoch, first_batch = epoch_position(start_step, per_epoch)
    sampler, batch_size = (loader.sampler, loader.batch_size) if isinstance(loader, _Sampled) else (None, None)
    for epoch in range(first_epoch, epochs):
        skip = first_batch if epoch == first_epoch else 0
        if isinstance(sampler, _SetsEpoch):
            sampler.set_epoch(epoch)
        if skip and isinstance(sampler, EpochSampler) and batch_size:
            sampler.skip(skip * batch_size)  # by index: the consumed batches are never loaded
            batches: Iterator[B] = iter(loader)
        else:
            batches = itertools.islice(iter(loader), skip, None)
        for index, batch in enumerate(batches, start=skip):
            yield epoch, index, batch
