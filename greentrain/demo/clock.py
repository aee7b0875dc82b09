"""The demo's replay clock: waits run at the speed-up, each training step is a fixed amount of simulated work.

At a speed-up of 480 (a day in three minutes) every real second of a wait is
eight simulated minutes. Training steps are not scaled by their real time:
on a busy machine a step takes two or ten times longer than when the job was
sized, and scaling that by the speed-up would turn an 8 h job into a 3 h or a
13 h one that no plan made before could fit. So the clock stands still except
while the engine sleeps (a wait), and each training step moves it by the
fixed simulated time the job was sized with (``advance``). Process plumbing
(building a trainer, loading a checkpoint, starting a Session) is no job
time either; the policy still plans its own resume overhead
(``resume_overhead_s``) in simulated time. Steps stay real training, and
their energy is measured in real time.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from greentrain.clock import Clock, ensure_aware_utc
from greentrain.errors import ConfigError

__all__ = ["HoldableReplayClock"]


class HoldableReplayClock(Clock):
    """Simulated time from ``origin`` at ``speedup`` × real time while released, plus what ``advance`` adds.

    Starts held. A ``sleep`` (a wait is job time) runs it and holds it again at the end; ``release()`` lets
    it run until ``hold()``; ``advance`` moves it by a fixed simulated time (one training step).
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

    def advance(self, seconds: float) -> None:
        """Move simulated time on by ``seconds`` (a training step's fixed share of the work)."""
        with self._lock:
            self._run_s += max(0.0, seconds) / self._speedup

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        was_held = self.held
        self.release()
        real_s = max(0.0, seconds) / self._speedup
        try:
            if stop is None:
                time.sleep(real_s)
                return False
            return stop.wait(real_s)
        finally:
            if was_held:
                self.hold()
