"""The one resume time of a wait: computed once, said once, kept, and the same in the run log.

A pause decision carries two times: ``until``, when the policy looks again
(a per-interval policy: the end of this interval), and its ``plan``, whose
first running interval is the resume. People are told the resume, moved up
by the deadline guard (``kept_resume``); the terminal, the ``state`` and
``action`` events of the run log, a checkpoint pause's ``resume_at`` and the
summary all use that one function.

Re-plans during the wait may move the resume. ``ResumeNotice`` tells the
terminal about a move only when it takes effect: when the announced time
comes and the job is still paused (one line with the new time), or when the
wait ends well before it (one line with the time it ended). A re-plan that
changes its mind a few milliseconds later (a replayed clock crosses an hour
between two re-plans) therefore never contradicts a line already printed:
the last time printed is the time kept. Each such line has a ``state`` event
with the same time in the run log.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from greentrain.policies.base import Action, Decision

__all__ = ["MOVE_MIN_S", "ResumeNotice", "kept_resume"]

MOVE_MIN_S = 60.0
"""Job-clock seconds a resume must move by before a line says so (a re-plan's latency is not a move)."""


def kept_resume(decision: Decision, now: datetime, latest_safe: datetime | None) -> datetime | None:
    """When a pause or delayed start is planned to end: the plan's first running interval after ``now`` (else
    ``until``), no later than the deadline guard's ``latest_safe`` resume, never before ``now``. None for a
    decision that runs."""
    if decision.action not in (Action.PAUSE, Action.DELAY_START):
        return None
    starts = [start for start, _end in decision.plan if start > now]
    resume = min(starts) if starts else decision.until
    if resume is None:
        return None
    if latest_safe is not None and latest_safe < resume:
        resume = latest_safe
    return max(now, resume)


class ResumeNotice:
    """What the terminal was told about the current wait (rank 0).

    ``say`` prints one line; ``log_until`` records the same time in the run log (a ``state`` event);
    ``fmt`` formats a time as every other greentrain line does.
    """

    def __init__(self, *, say: Callable[[str], None], log_until: Callable[[datetime, datetime], None],
                 fmt: Callable[[datetime], str]) -> None:
        self._say = say
        self._log_until = log_until
        self._fmt = fmt
        self.announced: datetime | None = None
        """The resume time the terminal was last told (None outside a wait)."""
        self.lines: list[str] = []
        """Every line said during the current wait (for tests and the log)."""
        self._starting = False

    def open(self, what: str, resume: datetime | None, reason: str, *, print_line: bool = True) -> str:
        """A wait begins: ``paused until R (reason)`` (``delaying start until ...`` before the first step)."""
        self.announced = resume
        self.lines = []
        self._starting = what != "paused"
        until = self._fmt(resume) if resume is not None else "the next re-plan"
        line = f"greentrain: {what} until {until}{f' ({reason})' if reason else ''}"
        if print_line:
            self._emit(line)
        else:
            self.lines.append(line)
        return line

    def check(self, now: datetime, resume: datetime | None, why: str) -> str | None:
        """While still waiting: once the announced time has come, say the new resume (one line)."""
        announced = self.announced
        if announced is None or resume is None or now < announced:
            return None
        if (resume - announced).total_seconds() < MOVE_MIN_S:
            return None
        self.announced = resume
        self._log_until(now, resume)
        still, noun = ("start still delayed", "start") if self._starting else ("still paused", "resume")
        line = (f"greentrain: {still} at {self._fmt(now)}: {noun} moved from {self._fmt(announced)} to "
                f"{self._fmt(resume)} ({why or 're-planned'})")
        self._emit(line)
        return line

    def close(self, now: datetime, why: str, *, interrupted: bool) -> str | None:
        """The wait ended: a line only when it ended well before the time announced (not when interrupted)."""
        announced, self.announced = self.announced, None
        if interrupted or announced is None or (announced - now).total_seconds() < MOVE_MIN_S:
            return None
        verb = "starting" if self._starting else "resuming"
        line = f"greentrain: {verb} at {self._fmt(now)}, before the {self._fmt(announced)} announced ({why})"
        self._emit(line)
        return line

    def _emit(self, line: str) -> None:
        self.lines.append(line)
        self._say(line)
