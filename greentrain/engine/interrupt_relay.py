"""Ends a wait from a signal handler without the handler ever taking a lock.

A Python signal handler runs on the main thread between two bytecodes, possibly while that thread is
inside ``threading.Event.wait`` or ``clear`` and holds the event's own (non-reentrant) lock. ``Event.set``
from the handler then waits forever on a lock its own thread holds: the process hangs, and every
scheduler job that sets the same event hangs behind it. ``queue.SimpleQueue.put`` is reentrant (safe in a
handler), so a handler only queues a request; a relay thread, alive for one wait, sets the events.

Ctrl-C under Python's default handler raises ``KeyboardInterrupt`` wherever the main thread happens to be,
inside a library's critical section too; for the length of a wait the relay takes SIGINT itself (only where
no other handler was installed) and records it, so the wait ends through the same path.
"""

from __future__ import annotations

import queue
import signal
import threading
from types import FrameType, TracebackType

__all__ = ["InterruptRelay"]


class InterruptRelay:
    """Sets ``events`` when ``request()`` is called, from any thread or a signal handler.

    Used as a context manager around one wait; a request made outside a wait is dropped when the next
    wait begins (the waits are for the time after the request, not before it).
    """

    def __init__(self, *events: threading.Event) -> None:
        self._events = events
        self._requests: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._own_sigint = False
        self.ctrl_c = False
        """Whether SIGINT reached the relay's own handler during the current wait."""

    def request(self) -> None:
        """Ask the current wait to end. Takes no lock: safe in a signal handler."""
        self._requests.put(True)

    def __enter__(self) -> InterruptRelay:
        while not self._requests.empty():  # stale: made before this wait
            self._requests.get_nowait()
        self.ctrl_c = False
        self._thread = threading.Thread(target=self._relay, name="greentrain-interrupt", daemon=True)
        self._thread.start()
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, self._on_sigint)
            self._own_sigint = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._own_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self._own_sigint = False
        self._requests.put(False)  # the relay's end, after any request already queued
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.ctrl_c = True
        self.request()

    def _relay(self) -> None:
        while self._requests.get():
            for event in self._events:
                event.set()
