"""The demo's replay clock, which stands still while the demo (re)builds its job.

At a speed-up of 480 (a day in three minutes) every real second is eight
simulated minutes. Training steps and waits are meant to be scaled that way;
process plumbing is not: building a trainer, loading a checkpoint and
starting a Session take a second or two, which would read as hours of the
trace and could push a resumed job past its deadline. The demo holds the
clock during that plumbing; the policy still plans its own resume overhead
(``resume_overhead_s``) in simulated time.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from greentrain.clock import Clock, ensure_aware_utc
from greentrain.errors import ConfigError

__all__ = ["HoldableReplayClock"]


class HoldableReplayClock(Clock):
    """Simulated time from ``origin`` at ``speedup`` × real time, excluding the real time spent held.

    Starts held. ``release()`` (or any ``sleep``: a wait is job time) lets it run; ``hold()`` stops it.
    """

    def __init__(self, origin: datetime, speedup: float) -> None:
        if not speedup > 0:
            raise ConfigError(f"speedup: must be > 0, got {speedup}")
        self._origin = ensure_aware_utc(origin, "origin")
        self._speedup = float(speedup)
        self._lock = threading.Lock()
        self._run_s = 0.0
        """Real seconds run before the current run began."""
        self._running_since: float | None = None

    @property
    def speedup(self) -> float:
        return self._speedup

    @property
    def held(self) -> bool:
        with self._lock:
            return self._running_since is None

    def now(self) -> datetime:
        with self._lock:
            real_s = self._run_s
            if self._running_since is not None:
                real_s += time.monotonic() - self._running_since
        return self._origin + timedelta(seconds=real_s * self._speedup)

    def hold(self) -> None:
        """Stop simulated time (idempotent)."""
        with self._lock:
            if self._running_since is not None:
                self._run_s += time.monotonic() - self._running_since
                self._running_since = None

    def release(self) -> None:
        """Let simulated time run again (idempotent)."""
        with self._lock:
            if self._running_since is None:
                self._running_since = time.monotonic()

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        self.release()
        real_s = max(0.0, seconds) / self._speedup
        if stop is None:
            time.sleep(real_s)
            return False
        return stop.wait(real_s)
