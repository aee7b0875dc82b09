"""The checkpoint handshake: how a program tells ``greentrain run`` it can be paused by checkpoint.

``greentrain run`` pauses a command one of two ways: *suspend* (SIGSTOP, then
SIGCONT: safe for any program, its GPUs stay allocated) or *checkpoint* (the
program saves and exits, and is relaunched at the planned time: its GPUs are
released). A program that does not handle the checkpoint signal dies of it
and loses its work, so checkpoint pauses go only to programs that say they
can take them:

1. For every launch greentrain sets ``GREENTRAIN_CHECKPOINT_SIGNAL`` (e.g.
   ``SIGUSR1``) and ``GREENTRAIN_CHECKPOINT_READY`` (the path of a file that
   does not exist yet), and ``GREENTRAIN_RESTARTS`` (0, then 1, 2, ... for
   relaunches).
2. The program declares itself by creating that file once its handler for
   the signal is installed.
3. On the signal it saves, writes ``saved`` into that file, and exits with
   status 75 (``RESUME_EXIT_CODE``); the relaunch resumes from what it saved.
   Either proof of the save is enough: the status (a plain program), or the
   file (under a launcher such as torchrun, which does not pass 75 through
   and may itself die of the signal).

``on_pause(save_fn)`` does all three for a Python program. A program greentrain
does not run (the variables unset) gets an inert ``PauseRequest``.

Anything else after the signal is not a checkpoint: exit 0 means finished,
another status failed, and death by the signal itself means nothing was
saved. The decision (``run_pause_mode``) is made here, once, from what the
program declared. This module imports nothing heavy: programs import it.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from greentrain.exitcodes import RESUME_EXIT_CODE

__all__ = [
    "SIGNAL_ENV", "READY_ENV", "RESTARTS_ENV", "SAVED", "PauseRequest", "on_pause", "restarts", "CheckpointHandshake",
    "run_pause_mode", "died_of",
]

SIGNAL_ENV = "GREENTRAIN_CHECKPOINT_SIGNAL"
"""The signal greentrain sends to ask for a checkpoint (a name such as ``SIGUSR1``)."""
READY_ENV = "GREENTRAIN_CHECKPOINT_READY"
"""The file a program creates to declare that it saves and exits 75 on that signal."""
RESTARTS_ENV = "GREENTRAIN_RESTARTS"
"""0 for the first launch, then the number of relaunches before this one."""
SAVED = "saved"
"""What a program writes into the declaration file once its checkpoint is complete."""


# ---- the program's side ----------------------------------------------------------------------------


class PauseRequest:
    """What ``on_pause`` installed: ``requested`` once the checkpoint signal arrived."""

    def __init__(self, save_fn: Callable[[], object], *, active: bool, at_step_boundary: bool) -> None:
        self._save_fn = save_fn
        self.active = active
        """True when running under ``greentrain run`` (the handler is installed and declared)."""
        self.at_step_boundary = at_step_boundary
        self.requested = False
        """The checkpoint signal arrived (with ``at_step_boundary``: save at the next ``check()``)."""

    def check(self) -> None:
        """At a step boundary: if a checkpoint was asked for, save and exit 75; otherwise return at once."""
        if self.requested:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Save (``save_fn()``), confirm it, and exit with ``RESUME_EXIT_CODE``: greentrain relaunches the
        program later."""
        self._save_fn()
        ready = os.environ.get(READY_ENV)
        if self.active and ready:
            _write_atomic(Path(ready), SAVED)
        sys.stdout.flush()
        sys.stderr.flush()
        raise SystemExit(RESUME_EXIT_CODE)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler ``on_pause`` installs: mark the request; save and exit now unless at a boundary."""
        self.requested = True
        if not self.at_step_boundary:
            self.checkpoint()


def on_pause(save_fn: Callable[[], object], *, at_step_boundary: bool = False) -> PauseRequest:
    """Declare to ``greentrain run`` that this program can be paused by checkpoint.

    Installs the handler for ``$GREENTRAIN_CHECKPOINT_SIGNAL`` and creates ``$GREENTRAIN_CHECKPOINT_READY``.
    On the signal, ``save_fn()`` runs and the program exits 75; by default from the handler itself (between
    two Python statements: ``save_fn`` must only read state that is always consistent), with
    ``at_step_boundary=True`` at the next ``request.check()`` the loop calls after each step.
    Outside ``greentrain run`` nothing is installed and ``check()`` never exits.
    """
    name = os.environ.get(SIGNAL_ENV)
    request = PauseRequest(save_fn, active=bool(name), at_step_boundary=at_step_boundary)
    if not name:
        return request
    signal.signal(_parse(name), request.handle)
    ready = os.environ.get(READY_ENV)
    if ready:
        Path(ready).write_text(name, encoding="utf-8")  # after the handler: a signal now is handled
    return request


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def restarts() -> int:
    """How many times greentrain relaunched this program before this launch (0 the first time)."""
    try:
        return max(0, int(os.environ.get(RESTARTS_ENV, "0")))
    except ValueError:
        return 0


def _parse(name: str) -> signal.Signals:
    text = name.strip().upper()
    if text.isdigit():
        return signal.Signals(int(text))
    return signal.Signals[text if text.startswith("SIG") else f"SIG{text}"]


# ---- greentrain's side -----------------------------------------------------------------------------


class CheckpointHandshake:
    """One job's handshake: the variables each launch gets, and whether the current launch declared."""

    def __init__(self, checkpoint_signal: int, folder: Path) -> None:
        self.signal = signal.Signals(checkpoint_signal)
        self.ready_path = folder / "checkpoint-ready"

    def env(self, launches: int) -> dict[str, str]:
        """The variables for a launch; forgets the previous launch's declaration (each launch declares)."""
        self.ready_path.unlink(missing_ok=True)
        return {SIGNAL_ENV: self.signal.name, READY_ENV: str(self.ready_path), RESTARTS_ENV: str(launches)}

    def declared(self) -> bool:
        """The running launch has declared it saves and exits 75 on the checkpoint signal."""
        return self.ready_path.exists()

    def saved(self, returncode: int) -> bool:
        """The launch that ended with ``returncode`` completed a checkpoint: it exited 75, or confirmed the
        save in the declaration file (a launcher in between may report another status)."""
        if returncode == RESUME_EXIT_CODE:
            return True
        try:
            return self.ready_path.read_text(encoding="utf-8").strip() == SAVED
        except OSError:
            return False


def run_pause_mode(requested: str, declared: bool) -> tuple[str, str | None]:
    """The pause mode ``greentrain run`` uses for a ``requested`` mode, and a line to say when it differs.

    ``suspend``: always. ``checkpoint``: only for a program that declared the handshake; otherwise suspend.
    ``auto``: 'auto' (the cost model may release) for a declared program, else suspend."""
    if requested == "suspend" or declared:
        return requested, None
    if requested == "checkpoint":
        return "suspend", (f"greentrain: --pause-mode checkpoint: the command has not declared that it saves and "
                           f"exits {RESUME_EXIT_CODE} on the checkpoint signal (greentrain.job.handshake.on_pause, "
                           f"or create ${READY_ENV}); pausing it by suspend instead")
    return "suspend", None


def died_of(returncode: int, sig: int) -> bool:
    """The child was killed by ``sig`` itself (directly, or reported by a shell as 128 + N)."""
    return returncode in (-sig, 128 + sig)
