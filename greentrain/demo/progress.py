"""The training progress bar: steps done of the job, simulated time and the last loss.

Waiting has its own bar (the engine's countdown); the two are never live at
once because the demo pauses in checkpoint mode (the training loop has ended
before the wait starts). Off a terminal nothing is drawn: the demo prints one
line per event instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import ProgressColumn

    from greentrain.runtime.metrics import StepMetrics

from greentrain.clock import Clock
from greentrain.terminal_bar import TerminalBar

__all__ = ["StepProgress"]


class StepProgress(TerminalBar):
    """A rich bar over ``total`` steps starting at ``done``; a no-op unless ``enabled`` and stderr is a tty."""

    def __init__(self, total: int, done: int, clock: Clock, *, enabled: bool = True) -> None:
        super().__init__(enabled=enabled)
        self.total = total
        self.done = done
        self.clock = clock

    def _columns(self) -> tuple[ProgressColumn, ...]:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn

        return TextColumn("training"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}")

    def _first(self) -> tuple[str, float, int, str]:
        return "training", self.total, self.done, ""

    def update(self, metrics: StepMetrics) -> None:
        """Trainer ``on_step`` callback (a ``StepMetrics``)."""
        self.done = int(metrics.step)
        if self.drawn:
            sim = self.clock.now().strftime("%m-%d %H:%M")
            self._show(self.done, f"sim {sim} UTC  loss {metrics.loss:.3f}")
