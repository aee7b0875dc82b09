"""Run a restore callback on every exit path, chaining to the host program's handlers.

We install handlers for SIGINT, SIGTERM and SIGHUP and an ``atexit`` hook. On a
signal the callback runs first, then the handler that was there before ours:
a Python callable is called (so ``KeyboardInterrupt`` still happens), an
ignored signal stays ignored, and the default action is re-delivered so the
process dies of the same signal as it would have without us. SIGKILL cannot
be caught: the next start restores from the journal instead.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["ExitHooks", "HOOKED_SIGNALS"]

log = logging.getLogger(__name__)

HOOKED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class ExitHooks:
    """Install/uninstall the handlers that call ``callback`` once per exit event."""

    def __init__(self, callback: Callable[[], Any]) -> None:
        self._callback = callback
        self._previous: dict[int, Any] = {}
        self._installed = False
        self._running = False
        self._pid = os.getpid()

    def install(self) -> None:
        """Register atexit; signal handlers only from the main thread (Python's rule)."""
        if self._installed:
            return
        atexit.register(self._run)
        if threading.current_thread() is threading.main_thread():
            for sig in HOOKED_SIGNALS:
                previous = signal.getsignal(sig)
                if previous is None:  # installed from C: we cannot chain it, leave it alone
                    continue
                self._previous[sig] = previous
                signal.signal(sig, self._on_signal)
        else:
            log.info("actuators created off the main thread: restore on exit and atexit only, no signal hooks")
        self._installed = True

    def uninstall(self) -> None:
        """Put back the previous handlers if ours are still the active ones."""
        if not self._installed:
            return
        atexit.unregister(self._run)
        if threading.current_thread() is threading.main_thread():
            for sig, previous in self._previous.items():
                if signal.getsignal(sig) == self._on_signal:
                    signal.signal(sig, previous)
        self._previous.clear()
        self._installed = False

    def _run(self) -> None:
        if self._running:  # a second signal while restoring: let the first finish
            return
        if os.getpid() != self._pid:  # a forked child (e.g. a data-loader worker) must not undo the parent's settings
            return
        self._running = True
        try:
            self._callback()
        except Exception:  # never let restore failure mask the exit reason
            log.exception("restoring GPU settings failed")
        finally:
            self._running = False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._run()  # a forked child skips the restore but still gets the previous handler's behaviour
        previous = self._previous.get(signum, signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
