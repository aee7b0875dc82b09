"""Rank 0 decides, every rank acts: the decision travels by a collective.

A multi-rank job must pause, resume or change settings at the same step on
every rank, or the next collective deadlocks. The engine on rank 0 computes
the decision and hands it to ``Broadcast.share``; every other rank passes
``None`` and receives rank 0's value. ``TorchBroadcast`` uses
``torch.distributed.broadcast_object_list`` (gloo or NCCL); ``LocalBroadcast``
is the single-process identity.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

T = TypeVar("T")

__all__ = ["Broadcast", "LocalBroadcast", "TorchBroadcast", "auto_broadcast", "make_broadcast", "barrier_for"]


class Broadcast(ABC):
    """Share one picklable value from rank 0 with all ranks."""

    rank: int = 0
    world_size: int = 1

    @property
    def is_leader(self) -> bool:
        """True on the rank that decides (rank 0)."""
        return self.rank == 0

    @abstractmethod
    def share(self, value: T | None) -> T:
        """Collective: rank 0's ``value`` is returned on every rank (others pass anything, e.g. None)."""


class LocalBroadcast(Broadcast):
    """One process: the value is returned as is."""

    def share(self, value: T | None) -> T:
        return cast(T, value)  # one process: it is rank 0, whose value is the T


class TorchBroadcast(Broadcast):
    """Broadcast through ``torch.distributed`` from global rank ``src`` of ``group``."""

    def __init__(self, group: ProcessGroup | None = None, src: int = 0) -> None:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            from greentrain.errors import ConfigError

            raise ConfigError("dist: torch.distributed is not initialised; call init_process_group first")
        self._dist = dist
        self._group = group
        self._src = src
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self._is_src = dist.get_rank() == src

    @property
    def is_leader(self) -> bool:
        return self._is_src

    def share(self, value: T | None) -> T:
        box = [value if self._is_src else None]
        self._dist.broadcast_object_list(box, src=self._src, group=self._group)
        return cast(T, box[0])  # rank 0's value, now on every rank


def auto_broadcast(dist_group: ProcessGroup | None = None) -> Broadcast:
    """TorchBroadcast when torch.distributed is initialised with > 1 rank, else LocalBroadcast."""
    try:
        import torch.distributed as dist
    except ImportError:  # torch without distributed support
        return LocalBroadcast()
    if dist.is_available() and dist.is_initialized() and dist.get_world_size(dist_group) > 1:
        return TorchBroadcast(dist_group)
    return LocalBroadcast()


def make_broadcast(dist: ProcessGroup | Broadcast | None) -> Broadcast:
    """A Broadcast from a user's ``dist=``: a Broadcast as is, a process group, or None (auto)."""
    if isinstance(dist, Broadcast):
        return dist
    if dist is not None:
        return TorchBroadcast(dist)
    return auto_broadcast()


def barrier_for(broadcast: Broadcast) -> Callable[[], None]:
    """A barrier over the broadcast's ranks (a collective every rank joins); a no-op for one process."""
    if broadcast.world_size <= 1:
        return lambda: None
    return lambda: broadcast.share(None)
