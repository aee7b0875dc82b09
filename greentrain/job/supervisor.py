"""The loop behind ``greentrain run``: an unmodified command under a timing policy.

The command has no step boundaries we can see, so the supervisor makes its
own: every ``poll_s`` of real time is one pseudo-step of the engine, and the
work is the user's ``--estimate-hours`` of running. A delayed start waits
before the first launch. A pause either stops the whole process group
(``suspend``: SIGSTOP, then SIGCONT) or sends the checkpoint signal, waits
for the program to save and exit 75, and relaunches it at the planned time
(``checkpoint``) — the latter only for a launch that declared the handshake
(``greentrain.job.handshake``); any other program is suspended. A program
that dies of the checkpoint signal saved nothing: it is not relaunched, and
its run's energy is counted as lost. SIGINT/SIGTERM to ``greentrain run``
end any wait and reach the command (a declared one gets the checkpoint
signal, so it saves first); a suspended command is never left stopped.

With a ``CommandScaler`` (carbon scaling) a new replica count is a checkpoint
(the checkpoint signal, as for a pause) and a relaunch with the command's
``--nproc`` changed; a relaunch that fails within ``checkpoint_timeout_s``
falls back to the count that worked, which is never planned again.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from greentrain.engine import Engine
from greentrain.exitcodes import RESUME_EXIT_CODE
from greentrain.policies.base import Action, Decision
from greentrain.engine.budget import BUDGET_EXIT_CODE
from greentrain.engine.pausemode import auto_mode
from greentrain.job.handshake import CheckpointHandshake, died_of, run_pause_mode
from greentrain.job.process import ChildProcess, exit_status
from greentrain.units import format_energy_j
from greentrain.job.replicas import CommandScaler

__all__ = ["Supervisor", "RESUMABLE_EXIT_CODES"]

SignalHandler = Callable[[int, FrameType | None], object] | int | None
"""What ``signal.signal`` hands back: a function, SIG_DFL/SIG_IGN, or None (set outside Python)."""
RESUMABLE_EXIT_CODES = (0, RESUME_EXIT_CODE)
"""A first launch at a new replica count that ends with these did not fail (0: finished, 75: saved)."""


class Supervisor:
    """Runs ``child`` under ``engine``; ``run()`` returns the command's final exit status."""

    def __init__(self, engine: Engine, child: ChildProcess, *, pause_mode: str = "suspend",
                 checkpoint_signal: int = signal.SIGUSR1, checkpoint_timeout_s: float = 600.0,
                 poll_s: float = 1.0, scaler: CommandScaler | None = None,
                 handshake: CheckpointHandshake | None = None) -> None:
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
        self._own_folder: Path | None = None
        if handshake is None:
            self._own_folder = Path(tempfile.mkdtemp(prefix="greentrain-run-"))
            handshake = CheckpointHandshake(checkpoint_signal, self._own_folder)
        self.handshake = handshake
        self.lost_energy_j: float | None = None
        """Energy of a launch that died of the checkpoint signal without saving (None: none died)."""
        self._launch_energy_j = 0.0

    def run(self, start: Decision) -> int:
        """Delay (``start``: what ``engine.begin()`` decided), launch, supervise, pause/resume, relaunch; the
        final exit status of the command."""
        previous = self._install_handlers()
        try:
            decision = start
            if decision.action != Action.RUN and self.engine.wait_until(decision.until, decision.reason):
                signum = self._terminating or signal.SIGINT
                self.engine.note(f"stopped by {signal.Signals(signum).name} during the delayed start; the command "
                                 "never started")
                return 128 + signum
            if self.scaler is not None and self.scaler.pending is not None:  # decided before the first launch
                self._trial = (self.scaler.replicas, time.monotonic())
                self._switch(self.scaler.pending, self.scaler.reason)
            return self._supervise()
        finally:
            if self.child.suspended:
                self.child.resume()
            self._restore_handlers(previous)
            if self._own_folder is not None:
                shutil.rmtree(self._own_folder, ignore_errors=True)

    def _supervise(self) -> int:
        self._launch()
        while True:
            rc = self.child.wait(self.poll_s)
            if rc is not None and self._failed_at_new_size(rc):
                continue
            if rc is not None:
                self.engine.step_end()
                if self._terminating is not None:  # Ctrl-C/SIGTERM: the status says so, whatever the command did
                    return self._stopped(rc)
                return exit_status(rc)
            if self.pause_mode == "checkpoint":  # plan with the draw of the pause this launch can take
                self.engine.pause_cost.set_released(self.handshake.declared())
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

    def _stopped(self, rc: int) -> int:
        """The command ended after greentrain was stopped by a signal: one line, and 128 + that signal."""
        assert self._terminating is not None
        name = signal.Signals(self._terminating).name
        if self.handshake.saved(rc):  # it saved on the checkpoint signal: resumable
            self.engine.note(f"stopped by {name}: the command saved its checkpoint; run the same command again to "
                             "resume")
        else:
            self.engine.note(f"stopped by {name}: the command got {name} and exited {exit_status(rc)} (no "
                             "checkpoint handshake declared: a rerun resumes from whatever it saved itself)")
        return 128 + self._terminating

    def _pause(self, decision: Decision) -> int | None:
        """Pause per mode; a final exit status if the command ended instead of pausing."""
        self.pauses += 1
        mode = self._mode()
        if self.pause_mode == "auto":  # a declared program can always be released: this supervisor relaunches it
            mode = auto_mode(self.engine, decision, can_release=mode == "auto")
        if mode == "suspend":
            self.child.suspend()
            self.engine.wait_until(decision.until, decision.reason or "paused")
            self.child.resume()
            return None
        rc = self._checkpoint("it keeps running")
        if rc is not None:
            return rc
        if self.engine.wait_until(decision.until, decision.reason or "paused (checkpoint)"):
            self._terminating = self._terminating or signal.SIGINT
            return self._stopped(RESUME_EXIT_CODE)  # stopped while saved: a rerun resumes
        self._launch()
        return None

    def _mode(self) -> str:
        """This pause's mode, decided from what the running launch declared (``run_pause_mode``)."""
        mode, line = run_pause_mode(self.pause_mode, self.handshake.declared())
        if line is not None:
            self.engine.note(line.removeprefix("greentrain: "))  # once per job: notes are said once
        if self.pause_mode != "auto":  # held while suspended: the wait's draw counts (auto sets its own)
            self.engine.pause_cost.set_released(mode == "checkpoint")
        return mode

    def _checkpoint(self, otherwise: str) -> int | None:
        """Send the checkpoint signal and wait for the save; None when saved (exit 75) or still running
        after ``checkpoint_timeout_s`` (``otherwise`` says what happens then), else the final exit status."""
        rc = self._signal_and_wait()
        if rc is None:  # it did not save and exit in time: do not wait forever, but do not lose it either
            self.engine.note(f"command did not exit within {self.checkpoint_timeout_s:g} s of the checkpoint "
                             f"signal; {otherwise}")
            return None
        if self.handshake.saved(rc):
            return None
        if died_of(rc, self.checkpoint_signal):
            self._lost(rc)
        elif rc == 0:
            self.engine.note("command exited 0 after the checkpoint signal: finished (a saved checkpoint exits "
                             f"{RESUME_EXIT_CODE})")
        return exit_status(rc)  # never relaunched: a crash loop, or a start from scratch

    def _signal_and_wait(self) -> int | None:
        """The checkpoint signal to the command's group; its exit status once it and every process of its
        group ended (a launcher may exit before its workers finished saving), None if it still runs."""
        started = time.monotonic()
        self.child.send(self.checkpoint_signal)
        rc = self.child.wait(self.checkpoint_timeout_s)
        if rc is not None and not self.handshake.saved(rc):
            self.child.wait_group(max(0.0, self.checkpoint_timeout_s - (time.monotonic() - started)))
        return rc

    def _lost(self, rc: int) -> None:
        """The launch died of the checkpoint signal: nothing saved; its energy is lost, not progress."""
        name = signal.Signals(self.checkpoint_signal).name
        self.lost_energy_j = max(0.0, self.engine.ledger.energy_j - self._launch_energy_j)
        spent = format_energy_j(self.lost_energy_j) if self.engine.measures_energy else "its energy"
        self.engine.note(f"the command died of {name} (exit {exit_status(rc)}) instead of saving and exiting "
                         f"{RESUME_EXIT_CODE}: its work since its own last save is lost ({spent}); not relaunched, "
                         "it would start over")

    def _rescale(self, replicas: int) -> int | None:
        """Checkpoint the command and relaunch it at ``replicas``; a final exit status if it ended instead."""
        scaler = self.scaler
        assert scaler is not None
        previous = scaler.replicas
        if not self.handshake.declared():  # a relaunch at a new count needs a checkpoint it can take
            scaler.pending = None
            self.engine.note(f"carbon scaling: the command has not declared the checkpoint handshake; it keeps "
                             f"running at {previous} replicas")
            return None
        rc = self._signal_and_wait()
        if rc is None:
            scaler.pending = None
            self.engine.note(f"command did not exit within {self.checkpoint_timeout_s:g} s of the checkpoint signal; "
                             f"it keeps running at {previous} replicas")
            return None
        if not self.handshake.saved(rc):
            if died_of(rc, self.checkpoint_signal):
                self._lost(rc)
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
        saves = self.pause_mode != "suspend" and self.handshake.declared()
        self.child.send(self.checkpoint_signal if saves else signal.SIGTERM)
        if self.child.wait(self.checkpoint_timeout_s) is None:
            self.child.send(signal.SIGKILL)
            self.child.wait(10.0)
        return BUDGET_EXIT_CODE

    def _launch(self) -> None:
        self.child.start({"GREENTRAIN_RUN": "1", **self.handshake.env(self.child.launches)})
        self._launch_energy_j = self.engine.ledger.energy_j
        self.engine.step_begin()

    # ---- signals ----------------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._terminating = signum
        self.engine.interrupt()
        # A declared program saves and exits 75 on the checkpoint signal: Ctrl-C leaves it resumable.
        self.child.send(self.checkpoint_signal if self.handshake.declared() else signum)
        if self.child.suspended:
            self.child.resume()

    def _install_handlers(self) -> dict[int, SignalHandler]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    @staticmethod
    def _restore_handlers(previous: dict[int, SignalHandler]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
