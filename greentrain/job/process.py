"""Control of an unmodified child command for ``greentrain run``.

The child runs in its own process group so a suspend (SIGSTOP) or resume
(SIGCONT) reaches every process it spawned (data-loader workers, launchers).
Commands are argument lists, never shell strings. Exit statuses pass through
the shell convention: killed by signal N -> 128 + N.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from greentrain.errors import ConfigError

__all__ = ["ChildProcess", "parse_signal", "exit_status", "reexec"]


def parse_signal(name: str, param: str = "--checkpoint-signal") -> signal.Signals:
    """'SIGUSR1', 'USR1' or '10' -> signal.Signals; ConfigError naming ``param`` otherwise."""
    text = name.strip().upper()
    try:
        if text.isdigit():
            return signal.Signals(int(text))
        return signal.Signals[text if text.startswith("SIG") else f"SIG{text}"]
    except (KeyError, ValueError):
        raise ConfigError(f"{param}: {name!r} is not a signal name (e.g. SIGUSR1, SIGTERM)") from None


def exit_status(returncode: int) -> int:
    """Shell-style exit status of a finished child."""
    return 128 - returncode if returncode < 0 else returncode


class ChildProcess:
    """One launch of the command; ``start`` may be called again after it exited (a relaunch)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        if not argv:
            raise ConfigError("COMMAND: give the command to run after '--'")
        self.argv = [str(a) for a in argv]
        self.env = dict(env) if env is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self.suspended = False
        self.launches = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, extra_env: Mapping[str, str] | None = None) -> None:
        """Launch the command in a new process group, inheriting stdin/stdout/stderr."""
        env = {**(self.env if self.env is not None else os.environ), **(extra_env or {})}
        try:
            self._proc = subprocess.Popen(self.argv, env=env, process_group=0)
        except FileNotFoundError:
            raise ConfigError(f"COMMAND: {self.argv[0]!r} not found; check the name or give a full path") from None
        except PermissionError:
            raise ConfigError(f"COMMAND: {self.argv[0]!r} is not executable") from None
        self.launches += 1
        self.suspended = False

    def poll(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def wait(self, timeout_s: float | None) -> int | None:
        """Return code, or None if still running after ``timeout_s``."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def wait_group(self, timeout_s: float, poll_s: float = 0.05) -> bool:
        """After the command itself exited: wait until no process of its group is left (a launcher's workers
        may still be saving); True when the group is gone within ``timeout_s``."""
        if self._proc is None:
            return True
        give_up = time.monotonic() + timeout_s
        while True:
            try:
                os.killpg(self._proc.pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:  # a member changed its credentials: it still exists
                pass
            if time.monotonic() >= give_up:
                return False
            time.sleep(poll_s)

    def send(self, sig: int) -> None:
        """Signal the whole process group (ignored if it already exited)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        try:
            os.killpg(self._proc.pid, sig)
        except ProcessLookupError:
            pass

    def suspend(self) -> None:
        """SIGSTOP the group: the command idles, keeping its memory and state."""
        self.send(signal.SIGSTOP)
        self.suspended = True

    def resume(self) -> None:
        """SIGCONT the group."""
        self.send(signal.SIGCONT)
        self.suspended = False

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Ask the group to end (SIGCONT + SIGTERM), then SIGKILL after ``grace_s``."""
        if self._proc is None or self._proc.poll() is not None:
            return self.poll()
        self.resume()
        self.send(signal.SIGTERM)
        rc = self.wait(grace_s)
        if rc is None:
            self.send(signal.SIGKILL)
            rc = self.wait(grace_s)
        return rc


def reexec() -> None:
    """Replace this process with a fresh run of the same command line (same pid, same environment)."""
    sys.stdout.flush()
    sys.stderr.flush()
    argv = list(sys.orig_argv or [sys.executable, *sys.argv])
    os.execv(sys.executable, [sys.executable, *argv[1:]])
