"""Exit paths for GPU settings: signals are recorded, never acted on inside the handler.

We install handlers for SIGINT, SIGTERM and SIGHUP and an ``atexit`` hook.
A Python signal handler runs between two bytecodes of the main thread, so it
can land in the middle of a journaled change; restoring from there let the
interrupted change carry on afterwards and leak. So the handler only
*records* the signal; the restore runs at a safe point chosen by the owner
(``ActuatorSet``): when the change in progress completes, at the next step
boundary, and at the latest from the exit hooks.

While the main thread is inside a ``critical()`` section (a journaled
change or a restore), the handler also defers what comes after recording:
the handler that was installed before ours. It runs when the section ends,
so ``KeyboardInterrupt`` or a host handler's ``sys.exit`` never tear a change
in half. A second signal of the same kind while one is deferred is passed on
at once (an escape hatch if a change hangs).

What comes after recording is what would have happened without us: a
Python handler is called (``KeyboardInterrupt`` still happens; a handler
that only sets a stop flag returns and the job goes on), an ignored signal
stays ignored and records nothing, and for the default action we raise
``SystemExit`` so the stack unwinds through ``with`` blocks (which restore)
and, once the restore hooks have run at exit, the signal is delivered again
so the process dies of it as it would have without us. SIGKILL cannot be
caught: the next start restores from the journal.

Once the process is dying of a signal that way, a later signal of another
kind has nothing left to do (without us the first one had already ended the
process): it is recorded only, even after our hooks are removed, so a
``KeyboardInterrupt`` from an impatient second Ctrl-C cannot land inside an
exit hook and turn death-by-signal into an exit status. After our hooks are
removed (the restore is done), a second signal of the same kind ends the
process at once.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["ExitHooks", "HOOKED_SIGNALS"]

log = logging.getLogger(__name__)

HOOKED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_PID = os.getpid()
_exit_signal: int | None = None
"""A signal whose default action (termination) we turned into SystemExit: delivered again at exit."""


def _deliver_exit_signal() -> None:
    # Registered at import, so it runs after the restore hooks (atexit runs hooks last-in first-out).
    if _exit_signal is None or os.getpid() != _PID:
        return
    signal.signal(_exit_signal, signal.SIG_DFL)
    os.kill(os.getpid(), _exit_signal)


atexit.register(_deliver_exit_signal)


def _dying() -> bool:
    """This process is dying of ``_exit_signal`` (a forked child inherits the flag, not the fate)."""
    return _exit_signal is not None and os.getpid() == _PID


def _while_dying(signum: int, frame: FrameType | None) -> None:
    """The handler once the process is dying of ``_exit_signal``: see the module doc."""
    if signum == _exit_signal:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


class ExitHooks:
    """Record exit signals, run ``callback`` at exit, and hold signals back inside ``critical()``."""

    def __init__(self, callback: Callable[[], object]) -> None:
        self._callback = callback
        self._previous: dict[int, Callable[[int, FrameType | None], object] | int | None] = {}
        self._installed = False
        self._running = False
        self._pid = os.getpid()
        self._depth = 0  # nesting of critical() in the main thread (the only thread handlers run in)
        self._deferred: list[tuple[int, FrameType | None]] = []
        self.requested: int | None = None
        """The last exit signal received (a request to restore), or None."""
        self.deferred_total = 0
        """Signals that arrived inside a critical section and were passed on when it ended."""

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
            dying = _dying()
            for sig, previous in self._previous.items():
                if signal.getsignal(sig) == self._on_signal:
                    signal.signal(sig, _while_dying if dying and previous != signal.SIG_IGN else previous)
        self._installed = False

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        """A section no signal handler may interrupt; held-back handlers run when the outermost one ends."""
        if threading.current_thread() is not threading.main_thread():
            yield  # handlers never run in this thread, so they cannot interrupt it
            return
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self._deferred:
                deferred, self._deferred = self._deferred, []
                for signum, frame in deferred:
                    self._pass_on(signum, frame)

    def _run(self) -> None:
        if self._running:
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
        # Records and defers only: no hardware, no journal, no locks here.
        previous = self._previous.get(signum, signal.SIG_DFL)
        if os.getpid() != self._pid:  # a forked child owns no settings: behave as if we were not here
            self._pass_on(signum, frame)
            return
        if previous == signal.SIG_IGN:
            return
        self.requested = signum
        if _dying() and signum != _exit_signal:
            return  # already dying of another signal: nothing left for this one to do
        if self._depth > 0 and all(s != signum for s, _ in self._deferred):
            self.deferred_total += 1
            self._deferred.append((signum, frame))
            return
        self._pass_on(signum, frame)

    def _pass_on(self, signum: int, frame: FrameType | None) -> None:
        """Do what the signal would have done without us."""
        global _exit_signal
        previous = self._previous.get(signum, signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        elif os.getpid() != self._pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        else:
            # Unwind (``with`` blocks restore), run the exit hooks, then die of the signal (see module doc).
            _exit_signal = signum
            log.info("signal %d: restoring GPU settings before exiting", signum)
            raise SystemExit(128 + signum)
