"""Saying out loud when a job will miss its deadline.

The guard (``engine/deadline_guard.py``) keeps pauses from costing the deadline, but
it cannot make slow steps fast: when the measured step time says the work
left no longer fits before the deadline, the job can only run flat out and
finish late. The watch notices that the first time it becomes likely (the
projected finish at the *measured* typical step time passes the deadline),
prints one line on stderr (step times in real seconds), withdraws it with
one line when the projection fits again with room to spare, and at the end gives the verdict the summary and
the exit status use (``greentrain.exitcodes.DEADLINE_MISSED_EXIT_CODE``
unless the deadline policy is best-effort). Rank 0 only.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from greentrain.units import format_duration_s, format_time

__all__ = ["DeadlineWatch", "DeadlineVerdict"]

log = logging.getLogger("greentrain.deadline")


@dataclass(frozen=True, slots=True)
class DeadlineVerdict:
    """How the job ended against its deadline."""

    deadline: datetime
    finished_at: datetime | None
    """When the last step ended (None: not finished)."""
    met: bool

    @property
    def late_s(self) -> float:
        """Seconds past the deadline (0 when met or unfinished)."""
        if self.finished_at is None:
            return 0.0
        return max(0.0, (self.finished_at - self.deadline).total_seconds())


class DeadlineWatch:
    """Warn once when a miss becomes likely; judge the end. ``say`` prints one line (stderr by default)."""

    def __init__(self, deadline: datetime | None, *, simulated: bool = False, speedup: float = 1.0,
                 say: Callable[[str], None] | None = None) -> None:
        self.deadline = deadline
        self.simulated = simulated
        self.speedup = speedup
        """Job-clock seconds per real second: step times are said in real seconds."""
        self.withdrawn = False
        """Whether the last warning was withdrawn (the miss is no longer likely)."""
        self.warned = False
        """Whether the 'will miss' line was printed (restored across relaunches so it is said once)."""
        self.projected_finish: datetime | None = None
        self._say = say or _stderr

    def check(self, now: datetime, work_remaining_s: float | None, *, step_time_s: float | None) -> str | None:
        """Project the finish running flat out from ``now``; the warning line the first time it is late, and
        the line withdrawing it when, warned, the projection fits again with room to spare."""
        if self.deadline is None:
            return None
        if now > self.deadline:
            if self.warned and not self.withdrawn:
                return None
            over_s = (now - self.deadline).total_seconds()
            message = (f"the job is still running {format_duration_s(over_s)} after its deadline "
                       f"{self._t(self.deadline)}; it will finish late")
        elif work_remaining_s is None:
            return None
        else:
            self.projected_finish = now + timedelta(seconds=max(0.0, work_remaining_s))
            if self.warned and not self.withdrawn:
                return self._maybe_withdraw(now)
            if self.projected_finish <= self.deadline:
                return None
            late_s = (self.projected_finish - self.deadline).total_seconds()
            message = (f"deadline {self._t(self.deadline)} will be missed by about {format_duration_s(late_s)}"
                       f"{self._rate(step_time_s)}; running flat out")
        self.warned, self.withdrawn = True, False
        self._say(f"greentrain: WARNING: {message}")
        return message

    def _maybe_withdraw(self, now: datetime) -> str | None:
        """Warned: withdraw once the projected finish leaves a tenth of the time left (hysteresis)."""
        if self.projected_finish is None or self.deadline is None:
            return None
        room_s = (self.deadline - self.projected_finish).total_seconds()
        if room_s <= 0.1 * max(0.0, (self.deadline - now).total_seconds()):
            return None
        self.withdrawn = True
        message = (f"deadline {self._t(self.deadline)} is no longer at risk: projected finish "
                   f"{self._t(self.projected_finish)}")
        self._say(f"greentrain: {message} (earlier warning withdrawn)")
        return message

    def _rate(self, step_time_s: float | None) -> str:
        """' at the measured N ms per step' in real seconds (the job clock may be simulated)."""
        if not step_time_s:
            return ""
        real_s = step_time_s / (self.speedup or 1.0)
        per_step = (f"{real_s * 1000:.3g} ms" if real_s < 1 else f"{real_s:.3g} s" if real_s < 60
                    else format_duration_s(real_s))
        return f" at the measured {per_step} per step (real time)" if self.simulated else f" at the measured {per_step} per step"

    def verdict(self, finished_at: datetime | None) -> DeadlineVerdict | None:
        """The end against the deadline (None without a deadline)."""
        if self.deadline is None:
            return None
        met = finished_at is not None and finished_at <= self.deadline
        return DeadlineVerdict(deadline=self.deadline, finished_at=finished_at, met=met)

    def announce_miss(self, verdict: DeadlineVerdict | None) -> None:
        """The summary's loud line: a finished job that ended after its deadline."""
        if verdict is None or verdict.met or verdict.finished_at is None:
            return
        self._say(f"greentrain: DEADLINE MISSED: finished {format_duration_s(verdict.late_s)} after the "
                  f"deadline {self._t(self.deadline)}")

    def _t(self, when: datetime | None) -> str:
        return format_time(when, simulated=self.simulated)


def _stderr(line: str) -> None:
    log.debug(line)
    print(line, file=sys.stderr, flush=True)
