"""The training progress bar: steps done of the job, simulated time and the last loss.

Waiting has its own bar (the engine's countdown); the two are never live at
once because the demo pauses in checkpoint mode (the training loop has ended
before the wait starts). Off a terminal nothing is drawn: the demo prints one
line per event instead.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from greentrain.runtime.metrics import StepMetrics

from greentrain.clock import Clock

__all__ = ["StepProgress"]


class StepProgress:
    """A rich bar over ``total`` steps starting at ``done``; a no-op unless ``enabled`` and stderr is a tty."""

    def __init__(self, total: int, done: int, clock: Clock, *, enabled: bool = True) -> None:
        self.total = total
        self.done = done
        self.clock = clock
        self.enabled = enabled and sys.stderr.isatty()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Self:
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(TextColumn("training"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[info]}"), console=Console(stderr=True), transient=True)
        self._progress.start()
        self._task = self._progress.add_task("training", total=self.total, completed=self.done, info="")
        return self

    def update(self, metrics: StepMetrics) -> None:
        """Trainer ``on_step`` callback (a ``StepMetrics``)."""
        self.done = int(metrics.step)
        if self._progress is None or self._task is None:
            return
        sim = self.clock.now().strftime("%m-%d %H:%M")
        self._progress.update(self._task, completed=self.done, info=f"sim {sim} UTC  loss {metrics.loss:.3f}")

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
