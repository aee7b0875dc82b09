"""What a pause costs this job: the draw of the hardware it holds while it waits.

A job that pauses in-process (``suspend``, or a checkpoint pause that waits
and re-executes itself) keeps its devices allocated, and they idle at tens of
watts (71 W for an H100 at rest, ~130 W just after load). A job that
checkpoints and exits for a scheduler to requeue releases them: its waiting
costs nothing unless the user says the node stays powered for them
(``waiting_power_w``). Planners charge this draw to every pause after the
first start (``Snapshot.waiting_power_w``).

The value, in order of preference: what the user set; 0 when the hardware is
released; the idle draw measured by the monitor during this job's pauses
(updated while a pause goes on and fed to every later decision); before any
pause, the devices' reading when the job began. The value each pause was
planned with, and each measured change, is written to the run log
(``waiting_power`` events) with where it came from. A reading that fails mid-pause keeps the last
good value, with a note.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from greentrain.errors import ConfigError

__all__ = ["WaitingPower", "check_waiting_power_w"]

MIN_MEASURE_S = 1.0
"""Shortest stretch of a pause (job-clock seconds) whose energy gives a measured draw."""


def check_waiting_power_w(value: Any, name: str = "waiting_power_w") -> float | None:
    """``value`` as watts >= 0 (None stays None); ConfigError naming ``name`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise ConfigError(f"{name}: must be a number of watts >= 0, got {value!r}")
    return float(value)


class WaitingPower:
    """The waiting draw the engine gives its policy, with its source label.

    Args:
        user_w: set by the user (``waiting_power_w``): used as is, never replaced by a measurement.
        released: the job gives its hardware back while paused (checkpoint, then exit or requeue).
        on_note / on_event: the engine's note and event-log callbacks.
    """

    def __init__(self, *, user_w: float | None = None, released: bool = False,
                 on_note: Callable[[str], None] = lambda message: None,
                 on_event: Callable[..., None] = lambda event, **fields: None) -> None:
        self.user_w = check_waiting_power_w(user_w)
        self.released = released
        self._on_note, self._on_event = on_note, on_event
        self.start_w: float | None = None
        """The devices' reading when the job began (before any pause)."""
        self.measured_w: float | None = None
        """Mean draw over the latest measured stretch of a pause."""
        self.energy_j = 0.0
        """Energy drawn while waiting so far (measured pauses)."""
        self._logged: tuple[float, str] | None = None

    @property
    def value_w(self) -> float:
        """Watts a pause is expected to draw (0 when nothing better is known: no monitor)."""
        return self._current()[0]

    @property
    def source(self) -> str:
        return self._current()[1]

    def _current(self) -> tuple[float, str]:
        if self.user_w is not None:
            return self.user_w, "set by the user"
        if self.released:
            return 0.0, "hardware released while paused"
        if self.measured_w is not None:
            return self.measured_w, "measured during a pause"
        if self.start_w is not None:
            return self.start_w, "devices' reading at start"
        return 0.0, "not measured (no monitor reading)"

    @property
    def held_w(self) -> float:
        """What holding the devices through a pause draws (measured, else the reading at start, else the
        user's figure): the cost ``auto`` weighs against a checkpoint and restart."""
        for value in (self.measured_w, self.start_w, self.user_w):
            if value is not None:
                return value
        return 0.0

    def set_released(self, released: bool) -> None:
        """The pause mode changed (``auto`` chose release or hold)."""
        self.released = released
        self._log()

    def observe_start(self, reading_w: float | None) -> None:
        """The devices' current reading when the job began; used until a pause is measured."""
        if reading_w is not None and math.isfinite(reading_w) and reading_w >= 0 and self.start_w is None:
            self.start_w = float(reading_w)

    def observe_pause(self, energy_j: float | None, duration_s: float, *, final: bool) -> None:
        """Energy the held devices drew over ``duration_s`` of the current pause (None: reading failed).

        Called during the pause (``final=False``: updates the value for re-plans) and at its end
        (``final=True``: also adds the energy to the waiting total).
        """
        if energy_j is None or not math.isfinite(energy_j) or energy_j < 0:
            value, source = self._current()
            self._on_note(f"idle power reading failed during a pause; keeping the last good value "
                          f"{value:.0f} W ({source})")
            return
        if duration_s >= MIN_MEASURE_S:
            self.measured_w = energy_j / duration_s
        if final:
            self.energy_j += energy_j
        self._log()

    def announce(self) -> None:
        """A pause begins: log the value it was planned with (once per change of value or source)."""
        self._log()

    def _log(self) -> None:
        value, source = self._current()
        key = (round(value, 1), source)
        if key != self._logged:
            self._logged = key
            self._on_event("waiting_power", waiting_power_w=value, source=source)
