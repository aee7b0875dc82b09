"""One owner per GPU: an ``fcntl.flock`` on ``<state_dir>/<uuid>.lock``.

The kernel drops a flock when its holder dies (even by SIGKILL), so holding
the lock proves that nobody alive is changing this GPU's knobs — and that any
entry left in its journal belongs to a dead process and must be restored.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from greentrain.actuators.journal import ensure_state_dir, safe_device_name
from greentrain.errors import ActuationError

__all__ = ["DeviceBusyError", "DeviceLock"]


class DeviceBusyError(ActuationError):
    """Another live process holds this GPU's knobs."""


class DeviceLock:
    """Non-blocking exclusive lock of one device's knobs."""

    def __init__(self, state_dir: Path, uuid: str) -> None:
        self.uuid = uuid
        self.path = ensure_state_dir(Path(state_dir)) / f"{safe_device_name(uuid)}.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise DeviceBusyError naming the holder's pid."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "another process"
            raise DeviceBusyError(
                f"GPU {self.uuid}: knobs are held by {who} (lock {self.path}); "
                "two jobs must not change one GPU's settings — this job goes on measuring only"
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # closing the last descriptor releases the flock


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
