"""Network fetches off the training thread: wait a small budget, then carry on without the answer.

A carbon API that is slow, trickling or down must not stall a step boundary.
``BackgroundFetch`` runs at most one call per key on a daemon thread; the
caller waits at most ``budget_s`` for it and otherwise gets ``PENDING`` at
once, and collects the answer at a later poll. A call already in flight is
never waited on twice, so a hung provider costs one budget, not one per step.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, Literal, TypeAlias, TypeVar, cast

__all__ = ["BackgroundFetch", "Fetched", "FetchFailed", "FetchOutcome", "PENDING"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Fetched(Generic[T_co]):
    """A call that returned: its value."""

    value: T_co


@dataclass(frozen=True, slots=True)
class FetchFailed:
    """A call that raised: the exception."""

    error: BaseException


class _Pending(enum.Enum):
    PENDING = "pending"


PENDING: Final = _Pending.PENDING
"""The call is still running (compare with ``is``)."""

FetchOutcome: TypeAlias = "Fetched[T] | FetchFailed | Literal[_Pending.PENDING]"
"""What a poll hands back: the value, the exception, or ``PENDING``."""


class _Job:
    def __init__(self, fn: Callable[[], object], name: str) -> None:
        self.done = threading.Event()
        self.outcome: Fetched[object] | FetchFailed | None = None
        self._fn = fn
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self.outcome = Fetched(self._fn())
        except BaseException as e:  # noqa: BLE001 - handed to the caller, who decides
            self.outcome = FetchFailed(e)
        finally:
            self.done.set()


class BackgroundFetch:
    """One in-flight call per key; results are picked up by the next ``poll``."""

    def __init__(self, name: str = "greentrain-signal") -> None:
        self._name = name
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        self.started = 0
        """Calls started (a test and benchmark counter)."""

    def busy(self, key: str) -> bool:
        """Whether a call for ``key`` is running or finished but not yet collected."""
        with self._lock:
            return key in self._jobs

    def poll(self, key: str, fn: Callable[[], T] | None = None, budget_s: float = 0.0) -> FetchOutcome[T]:
        """The finished outcome for ``key`` if there is one; else start ``fn`` (when given and none is
        running) and wait up to ``budget_s`` for it. ``PENDING`` when no outcome is ready."""
        with self._lock:
            job = self._jobs.get(key)
            fresh = job is None
            if job is None:
                if fn is None:
                    return PENDING
                job = self._jobs[key] = _Job(fn, f"{self._name}-{key}")
                self.started += 1
                job.thread.start()
        if fresh and budget_s > 0:
            job.done.wait(budget_s)  # only a call started now is waited on
        if not job.done.is_set():
            return PENDING
        with self._lock:
            if self._jobs.get(key) is job:
                del self._jobs[key]
        assert job.outcome is not None
        # a key is only ever started with one kind of call, so its outcome holds that call's T
        return cast("Fetched[T] | FetchFailed", job.outcome)
