"""The countdown a person sees on a terminal while a job waits: the planned window and the time left."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from greentrain.terminal_bar import TerminalBar

if TYPE_CHECKING:
    from rich.progress import ProgressColumn

    from greentrain.clock import Clock

__all__ = ["Countdown", "WaitWindow"]


class WaitWindow(Protocol):
    """The wait a countdown shows (``engine.waiter.Waiter``): where it ends, and the resume people are told."""

    @property
    def target(self) -> datetime | None: ...

    def planned_resume(self) -> datetime | None: ...


class Countdown(TerminalBar):
    """A rich progress bar showing the planned window; a no-op when disabled or not on a terminal."""

    def __init__(self, wait: WaitWindow, clock: Clock, deadline: datetime | None, reason: str, *,
                 enabled: bool) -> None:
        super().__init__(enabled=enabled)
        self.wait = wait
        self.clock = clock
        self.deadline = deadline
        self.reason = reason
        self._start = clock.now()

    def _columns(self) -> tuple[ProgressColumn, ...]:
        from rich.progress import BarColumn, TextColumn

        return TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}")

    def _first(self) -> tuple[str, float, int, str]:
        return self._describe(), 1.0, 0, ""

    def update(self) -> None:
        """Redraw the bar at the job clock's now (the target may have moved since the last redraw)."""
        if not self.drawn:
            return
        target = self.wait.target or self.clock.now()
        total_s = max(1e-9, (target - self._start).total_seconds())
        left_s = max(0.0, (target - self.clock.now()).total_seconds())
        self._show(1.0 - left_s / total_s, f"{_hms(left_s)} left", self._describe())

    def _describe(self) -> str:
        window = f"run from {_fmt(self.wait.planned_resume())}"
        if self.deadline is not None:
            window += f" to finish by {_fmt(self.deadline)}"
        return f"waiting: {window}" + (f" — {self.reason}" if self.reason else "")


def _fmt(value: datetime | None) -> str:
    from greentrain.units import format_time

    return format_time(value)


def _hms(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s"
