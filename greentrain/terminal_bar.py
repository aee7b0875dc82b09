"""A progress bar on the terminal that is nothing at all off one.

The demo's training bar and the engine's countdown while a job waits share
this: drawn on stderr (stdout stays for the program's own output), transient
(gone when it ends, so logs read the same with and without a terminal), and a
no-op unless stderr is a terminal, where the callers print one line per event
instead.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn, TaskID

__all__ = ["TerminalBar"]


class TerminalBar:
    """One rich task on stderr with a text field ``info``; subclasses give its columns and first drawing."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def _columns(self) -> tuple[ProgressColumn, ...]:
        raise NotImplementedError

    def _first(self) -> tuple[str, float, int, str]:
        """The bar's first drawing: description, total, completed, and the text of the ``info`` field."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import Progress

        self._progress = Progress(*self._columns(), console=Console(stderr=True), transient=True)
        self._progress.start()
        description, total, completed, info = self._first()
        self._task = self._progress.add_task(description, total=total, completed=completed, info=info)
        return self

    def _show(self, completed: float, info: str, description: str | None = None) -> None:
        """Redraw at ``completed`` with this ``info`` text (and a new description); nothing when not drawn."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=completed, description=description, info=info)

    @property
    def drawn(self) -> bool:
        """Whether the bar is on the terminal now."""
        return self._progress is not None

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
