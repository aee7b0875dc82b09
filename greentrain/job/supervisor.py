"""The loop behind ``greentrain run``: an unmodified command under a timing policy.

The command has no step boundaries we can see, so the supervisor makes its
own: every ``poll_s`` of real time is one pseudo-step of the engine, and the
work is the user's ``--estimate-hours`` of running. A delayed start waits
before the first launch. A pause either stops the whole process group
(``suspend``: SIGSTOP, then SIGCONT) or sends the checkpoint signal the
program handles, waits for it to exit, and relaunches it at the planned time
(``checkpoint``). SIGINT/SIGTERM to ``greentrain run`` reach the command and
end any wait; a suspended command is never left stopped.

With a ``CommandScaler`` (carbon scaling) a new replica count is a checkpoint
(the checkpoint signal, as for a pause) and a relaunch with the command's
``--nproc`` changed; a relaunch that fails within ``checkpoint_timeout_s``
falls back to the count that worked, which is never planned again.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
import threading
import time
from types import FrameType

from greentrain.engine import Engine
from greentrain.exitcodes import RESUME_EXIT_CODE
from greentrain.policies.base import Action, Decision
from greentrain.engine.budget import BUDGET_EXIT_CODE
from greentrain.engine.pausemode import auto_mode
from greentrain.job.process import ChildProcess, exit_status
from greentrain.job.replicas import CommandScaler

__all__ = ["Supervisor", "RESUMABLE_EXIT_CODES"]

SignalHandler = Callable[[int, FrameType | None], object] | int | None
"""What ``signal.signal`` hands back: a function, SIG_DFL/SIG_IGN, or None (set outside Python)."""
RESUMABLE_EXIT_CODES = (0, RESUME_EXIT_CODE)
"""After the checkpoint signal, these exit codes (and death by that signal) mean 'saved, relaunch me'."""


class Supervisor:
    """Runs ``child`` under ``engine``; ``run()`` returns the command's final exit status."""

    def __init__(self, engine: Engine, child: ChildProcess, *, pause_mode: str = "suspend",
                 checkpoint_signal: int = signal.SIGUSR1, checkpoint_timeout_s: float = 600.0,
                 poll_s: float = 1.0, scaler: CommandScaler | None = None) -> None:
        self.engine = engine
        self.scaler = scaler
        self._trial: tuple[int, float] | None = None
        """After a change of count: (the count that worked, when the new launch started, monotonic s)."""
        self.child = child
        self.pause_mode = pause_mode
        self.checkpoint_signal = checkpoint_signal
        self.checkpoint_timeout_s = checkpoint_timeout_s
        self.poll_s = poll_s
        self.pauses = 0
        self._terminating: int | None = None

    def run(self, start: Decision) -> int:
        """Delay (``start``: what ``engine.begin()`` decided), launch, supervise, pause/resume, relaunch; the
        final exit status of the command."""
        previous = self._install_handlers()
        try:
            decision = start
            if decision.action != Action.RUN and self.engine.wait_until(decision.until, decision.reason):
                return 128 + (self._terminating or signal.SIGINT)
            if self.scaler is not None and self.scaler.pending is not None:  # decided before the first launch
                self._trial = (self.scaler.replicas, time.monotonic())
                self._switch(self.scaler.pending, self.scaler.reason)
            return self._supervise()
        finally:
            if self.child.suspended:
                self.child.resume()
            self._restore_handlers(previous)

    def _supervise(self) -> int:
        self._launch()
        while True:
            rc = self.child.wait(self.poll_s)
            if rc is not None and self._failed_at_new_size(rc):
                continue
            if rc is not None:
                self.engine.step_end()
                return exit_status(rc)
            decision = self.engine.step_end()
            if self.scaler is not None and self.scaler.pending is not None and self._terminating is None:
                rc = self._rescale(self.scaler.pending)
                if rc is not None:
                    return rc
            if decision.action == Action.STOP:
                return self._stop_for_budget(decision)
            if decision.action != Action.RUN and not self.engine.finished and self._terminating is None:
                rc = self._pause(decision)
                if rc is not None:
                    return rc
            self.engine.step_begin()

    def _pause(self, decision: Decision) -> int | None:
        """Pause per mode; a final exit status if the command ended instead of pausing."""
        self.pauses += 1
        mode = self.pause_mode  # auto: this supervisor relaunches the command, so it can always release
        if mode == "auto":
            mode = auto_mode(self.engine, decision, can_release=True)
        if mode == "suspend":
            self.child.suspend()
            self.engine.wait_until(decision.until, decision.reason or "paused")
            self.child.resume()
            return None
        self.child.send(self.checkpoint_signal)
        rc = self.child.wait(self.checkpoint_timeout_s)
        if rc is None:  # it did not save and exit in time: do not wait forever, but do not lose it either
            self.engine.note(f"command did not exit within {self.checkpoint_timeout_s:g} s of the checkpoint "
                              "signal; it keeps running")
            return None
        if not (rc in RESUMABLE_EXIT_CODES or rc == -self.checkpoint_signal):
            return exit_status(rc)  # a real failure: pass it through rather than relaunch a crash loop
        if self.engine.wait_until(decision.until, decision.reason or "paused (checkpoint)"):
            return 128 + (self._terminating or signal.SIGINT)
        self._launch()
        return None

    def _rescale(self, replicas: int) -> int | None:
        """Checkpoint the command and relaunch it at ``replicas``; a final exit status if it ended instead."""
        scaler = self.scaler
        assert scaler is not None
        previous = scaler.replicas
        self.child.send(self.checkpoint_signal)
        rc = self.child.wait(self.checkpoint_timeout_s)
        if rc is None:
            scaler.pending = None
            self.engine.note(f"command did not exit within {self.checkpoint_timeout_s:g} s of the checkpoint signal; "
                             f"it keeps running at {previous} replicas")
            return None
        if not (rc in RESUMABLE_EXIT_CODES or rc == -self.checkpoint_signal):
            return exit_status(rc)
        self._switch(replicas, f"{scaler.reason or 'carbon scaling'}")
        self._trial = (previous, time.monotonic())
        self._launch()
        return None

    def _switch(self, replicas: int, reason: str) -> None:
        """Relaunch parameters for ``replicas``: the command line, and the remaining running time converted to
        the new count's throughput (the engine counts work as running time at the current count)."""
        scaler, engine = self.scaler, self.engine
        assert scaler is not None
        old = scaler.replicas
        progress = engine.progress
        if progress.work_total_s is not None:
            left_s = max(0.0, progress.work_total_s - progress.running_s)
            progress.work_total_s = progress.running_s + left_s * scaler.speed_ratio(old, replicas)
        self.child.argv = scaler.switch(replicas)
        engine.io.job_stats.update(replicas_actual=replicas)
        engine.event("replicas", kind="actual", replicas=replicas, replicas_from=old, reason=reason,
                     command=" ".join(self.child.argv))

    def _failed_at_new_size(self, rc: int) -> bool:
        """The first launch at a new count failed soon after it started: relaunch at the count that worked."""
        trial, self._trial = self._trial, None
        if trial is None or rc == 0 or self.scaler is None or self._terminating is not None:
            return False
        working, started = trial
        if rc in RESUMABLE_EXIT_CODES or time.monotonic() - started > self.checkpoint_timeout_s:
            return False
        failed = self.scaler.replicas
        self.scaler.failed.add(failed)
        self.engine.note(f"relaunch at {failed} replicas failed (exit {exit_status(rc)}); falling back to {working} "
                         f"replicas (the command resumes from its checkpoint); {failed} will not be planned again")
        self._switch(working, f"launch at {failed} replicas failed")
        self._launch()
        return True

    def _stop_for_budget(self, decision: Decision) -> int:
        """A budget is spent: ask the command to save and exit (checkpoint modes) or end it (suspend);
        greentrain's status is ``BUDGET_EXIT_CODE`` either way."""
        self.engine.note(f"{decision.reason}; stopping the command")
        self.child.send(self.checkpoint_signal if self.pause_mode != "suspend" else signal.SIGTERM)
        if self.child.wait(self.checkpoint_timeout_s) is None:
            self.child.send(signal.SIGKILL)
            self.child.wait(10.0)
        return BUDGET_EXIT_CODE

    def _launch(self) -> None:
        self.child.start({"GREENTRAIN_RUN": "1", "GREENTRAIN_RESTARTS": str(self.child.launches),
                          "GREENTRAIN_CHECKPOINT_SIGNAL": signal.Signals(self.checkpoint_signal).name})
        self.engine.step_begin()

    # ---- signals ----------------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._terminating = signum
        self.engine.interrupt()
        if self.child.suspended:
            self.child.resume()
        self.child.send(signum)

    def _install_handlers(self) -> dict[int, SignalHandler]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    @staticmethod
    def _restore_handlers(previous: dict[int, SignalHandler]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
