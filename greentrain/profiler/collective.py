"""How ranks agree: all-reduce numbers, broadcast rank 0's object.

Profiling and precision choices must be identical on every rank (a rank-local
choice can deadlock a collective or desynchronise numerics). Everything that
decides goes through a ``Collective``: ``LocalCollective`` for one process,
``TorchCollective`` over an initialised ``torch.distributed`` group (gloo or
NCCL). Tests inject their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup

T = TypeVar("T")

__all__ = ["Collective", "LocalCollective", "TorchCollective", "default_collective"]


class Collective(Protocol):
    """The two collectives the profiler and precision controller need."""

    def all_reduce(self, values: list[float], op: str) -> list[float]:
        """Element-wise 'sum', 'max' or 'min' over ranks."""
        ...

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank."""
        ...

    @property
    def rank(self) -> int: ...


class LocalCollective:
    """A single process: identity."""

    rank = 0

    def all_reduce(self, values: list[float], op: str) -> list[float]:
        if op not in ("sum", "max", "min"):
            raise ValueError(f"op: {op!r} is not sum, max or min")
        return list(values)

    def broadcast(self, obj: T) -> T:
        return obj


class TorchCollective:
    """Over the default ``torch.distributed`` process group (must be initialised)."""

    def __init__(self, group: ProcessGroup | None = None) -> None:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("TorchCollective needs an initialised torch.distributed process group")
        self._dist = dist
        self._group = group

    @property
    def rank(self) -> int:
        return self._dist.get_rank(self._group)

    def _device(self) -> torch.device:
        import torch

        backend = self._dist.get_backend(self._group)
        return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")

    def all_reduce(self, values: list[float], op: str) -> list[float]:
        import torch

        ops = {"sum": self._dist.ReduceOp.SUM, "max": self._dist.ReduceOp.MAX, "min": self._dist.ReduceOp.MIN}
        if op not in ops:
            raise ValueError(f"op: {op!r} is not sum, max or min")
        tensor = torch.tensor(values, dtype=torch.float64, device=self._device())
        self._dist.all_reduce(tensor, op=ops[op], group=self._group)
        return [float(v) for v in tensor.cpu().tolist()]

    def broadcast(self, obj: T) -> T:
        box = [obj]
        self._dist.broadcast_object_list(box, src=0, group=self._group)
        return box[0]


def default_collective() -> Collective:
    """``TorchCollective`` when torch.distributed is initialised, else ``LocalCollective``."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return TorchCollective()
    except ImportError:
        pass
    return LocalCollective()
