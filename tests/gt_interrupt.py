"""Ctrl-C a child process once it has said a given line on stderr, as a user at the terminal would."""

from __future__ import annotations

import signal
import subprocess
import time

__all__ = ["interrupt_after"]


def interrupt_after(proc: subprocess.Popen[str], marker: str, timeout_s: float = 40.0) -> tuple[str, str]:
    """Read stderr until a line holds ``marker``, send SIGINT, wait; (stdout, all of stderr).

    Fails (AssertionError with what was said) when the marker never comes; the child is never left running.
    """
    try:
        lines: list[str] = []
        give_up = time.monotonic() + timeout_s
        while time.monotonic() < give_up:
            line = proc.stderr.readline() if proc.stderr else ""
            lines.append(line)
            if marker in line or not line:
                break
        assert any(marker in line for line in lines), "".join(lines)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out, "".join(lines) + err
