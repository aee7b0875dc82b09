"""Clocks are passed in, never read globally, so time-dependent code is testable.

``SystemClock`` is wall time. ``ReplayClock`` runs a simulated calendar at a
speed-up (a day of carbon trace in minutes for demos and tests). ``FrozenClock``
only moves when told to.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "SystemClock", "ReplayClock", "FrozenClock", "ensure_aware_utc", "parse_deadline", "DEADLINE_HELP"]

DEADLINE_HELP = "Deadline: ISO-8601 with timezone (2026-11-22T06:00Z) or '+H' hours from now (+12)."


def ensure_aware_utc(value: datetime, name: str = "datetime") -> datetime:
    """Return ``value`` in UTC; refuse naive datetimes with a message naming ``name``."""
    if value.tzinfo is None or value.utcoffset() is None:
        from greentrain.errors import ConfigError

        raise ConfigError(f"{name}: naive datetime {value.isoformat()} — give a timezone, e.g. '...Z' or '+00:00'")
    return value.astimezone(UTC)


def parse_deadline(value: str, now: datetime, param: str = "--deadline") -> datetime:
    """Parse ``+H`` (hours after ``now``) or an aware ISO-8601 time into aware UTC.

    Raises ``ConfigError`` naming ``param`` (the flag or key the value came from) and the fix; the CLI
    turns it into its one-line usage error.
    """
    from greentrain.errors import ConfigError

    text = str(value).strip()
    if text.startswith("+"):
        try:
            hours = float(text[1:])
        except ValueError:
            raise ConfigError(f"{param}: {text!r} is not '+H' hours (e.g. +12)") from None
        if not hours > 0 or hours == float("inf"):
            raise ConfigError(f"{param}: {text!r}: hours must be a finite number > 0")
        return now + timedelta(hours=hours)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{param}: {text!r} is not ISO-8601 (e.g. 2026-11-22T06:00Z)") from None
    if parsed.tzinfo is None:
        raise ConfigError(f"{param}: {text!r} has no timezone; add 'Z' or '+01:00'")
    return parsed.astimezone(UTC)


class Clock(ABC):
    """Source of 'now' (aware UTC) and of waiting."""

    @abstractmethod
    def now(self) -> datetime:
        """Current time as an aware UTC datetime."""

    @abstractmethod
    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Wait ``seconds`` of this clock's time; return True if ``stop`` was set first."""

    def sleep_until(self, when: datetime, stop: threading.Event | None = None) -> bool:
        """Wait until ``when``; return True if interrupted by ``stop``."""
        remaining_s = (when - self.now()).total_seconds()
        if remaining_s <= 0:
            return False
        return self.sleep(remaining_s, stop)

    @property
    def speedup(self) -> float:
        """Clock seconds per real second (1 for wall time)."""
        return 1.0

    def catch_up(self, when: datetime) -> bool:
        """Move a simulated calendar forward to ``when`` (a relaunched job continues where its previous
        process stopped, so its times never go back); True if it moved. Wall time cannot move: no-op."""
        return False

    simulated: bool = True
    """Whether this clock's time is not the wall's (times people read are marked 'simulated')."""


class SystemClock(Clock):
    """Wall-clock time."""

    simulated = False

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        if stop is None:
            time.sleep(max(0.0, seconds))
            return False
        return stop.wait(max(0.0, seconds))


class ReplayClock(Clock):
    """A calendar that starts at ``origin`` and runs ``speedup`` times faster than real time."""

    def __init__(self, origin: datetime, speedup: float = 1.0) -> None:
        if speedup <= 0:
            from greentrain.errors import ConfigError

            raise ConfigError(f"speedup: must be > 0, got {speedup}")
        self._origin = ensure_aware_utc(origin, "origin")
        self._speedup = float(speedup)
        self._t0 = time.monotonic()

    @property
    def speedup(self) -> float:
        return self._speedup

    def now(self) -> datetime:
        return self._origin + timedelta(seconds=(time.monotonic() - self._t0) * self._speedup)

    def catch_up(self, when: datetime) -> bool:
        ahead = ensure_aware_utc(when, "when") - self.now()
        if ahead <= timedelta(0):
            return False
        self._origin += ahead
        return True

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        real_s = max(0.0, seconds) / self._speedup
        if stop is None:
            time.sleep(real_s)
            return False
        return stop.wait(real_s)


class FrozenClock(Clock):
    """Time that moves only by ``advance`` or ``sleep`` (which advances instantly)."""

    def __init__(self, start: datetime) -> None:
        self._now = ensure_aware_utc(start, "start")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def catch_up(self, when: datetime) -> bool:
        with self._lock:
            when = ensure_aware_utc(when, "when")
            if when <= self._now:
                return False
            self._now = when
            return True

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += timedelta(seconds=seconds)

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        if stop is not None and stop.is_set():
            return True
        self.advance(max(0.0, seconds))
        return False
