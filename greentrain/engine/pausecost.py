"""What a pause costs this job: the waiting ledger.

A job that pauses in-process (``suspend``, or a checkpoint pause that waits
and re-executes itself) keeps its devices allocated, and they idle at tens of
watts (71 W for an H100 at rest, ~130 W just after load). A job that
checkpoints and exits for a scheduler to requeue releases them: its waiting
costs nothing unless the user says the node stays powered for them
(``waiting_power_w``). Planners charge this draw to every pause after the
first start (``Snapshot.waiting_power_w``).

The draw, in order of preference: what the user set; 0 when the hardware is
released; the idle draw measured by the monitor during this job's pauses
(updated while a pause goes on and fed to every later decision); before any
pause, the devices' reading when the job began. ``PauseCost`` also brackets
each pause (the held devices' energy before and after) and says how much
energy the pause drew, which the engine charges to the job. Each value a pause
is planned with, and each measured change, goes to the run log
(``waiting_power`` events, from ``log_fields``) with where it came from. A
reading that fails mid-pause keeps the last good value, with a note.
"""

from __future__ import annotations

import math
from datetime import datetime

from greentrain.policies.settings import PolicySettings

__all__ = ["PauseCost"]

MIN_MEASURE_S = 1.0
"""Shortest stretch of a pause (real seconds) whose energy gives a measured draw."""


class PauseCost:
    """The waiting draw the engine gives its policy (with its source) and the energy pauses drew.

    Args:
        user_w: set by the user (``waiting_power_w``): used as is, never replaced by a measurement.
        released: the job gives its hardware back while paused (checkpoint, then exit or requeue).
    """

    def __init__(self, *, user_w: float | None = None, released: bool = False) -> None:
        self.user_w = float(user_w) if user_w is not None else None
        self.released = released
        self.start_w: float | None = None
        """The devices' reading when the job began (before any pause)."""
        self.measured_w: float | None = None
        """Mean draw over the latest measured stretch of a pause."""
        self.energy_j = 0.0
        """Energy drawn while waiting so far (measured pauses)."""
        self._logged: tuple[float, str] | None = None
        self._pause: tuple[datetime, float | None] | None = None

    @classmethod
    def for_policy(cls, settings: PolicySettings, *, user_w: float | None = None,
                   released: bool = False) -> PauseCost:
        """The user's figure, else the policy's ``[settings] waiting_power_w``."""
        return cls(user_w=user_w if user_w is not None else settings.waiting_power_w, released=released)

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

    def observe_start(self, reading_w: float | None) -> None:
        """The devices' current reading when the job began; used until a pause is measured."""
        if reading_w is not None and math.isfinite(reading_w) and reading_w >= 0 and self.start_w is None:
            self.start_w = float(reading_w)

    # ---- one pause ----------------------------------------------------------------------------------

    def begin_pause(self, now: datetime, held_energy_j: float | None) -> None:
        """A pause starts at ``now``; ``held_energy_j``: the held devices' energy counter (None: unknown)."""
        self._pause = (now, held_energy_j)

    @property
    def paused_since(self) -> datetime | None:
        """When the current pause began (None between pauses)."""
        return self._pause[0] if self._pause is not None else None

    def observe_pause(self, now: datetime, held_energy_j: float | None, speedup: float, *,
                      final: bool = False) -> str | None:
        """The held devices' draw over the pause so far (during it: updates the value for re-plans; ``final``:
        also adds its energy to the waiting total). A note when the reading failed (the last value stays)."""
        if self._pause is None:
            return None
        started, before_j = self._pause
        energy_j = None if held_energy_j is None or before_j is None else max(0.0, held_energy_j - before_j)
        duration_s = (now - started).total_seconds() / speedup  # energy is in real joules
        if energy_j is None or not math.isfinite(energy_j):
            value, source = self._current()
            return f"idle power reading failed during a pause; keeping the last good value {value:.0f} W ({source})"
        if duration_s >= MIN_MEASURE_S:
            self.measured_w = energy_j / duration_s
        if final:
            self.energy_j += energy_j
        return None

    def end_pause(self, now: datetime, held_energy_j: float | None, speedup: float) -> float | None:
        """The pause ends: the joules it drew, to charge to the job (None: unknown, or the devices were
        released and the user gave no figure)."""
        if self._pause is None:
            return None
        started, before_j = self._pause
        self._pause = None
        if self.released:  # the devices were given back: only a user's figure is charged
            return None if self.user_w is None else self.user_w * (now - started).total_seconds() / speedup
        if before_j is None or held_energy_j is None:
            return None
        return max(0.0, held_energy_j - before_j)

    def log_fields(self) -> dict[str, object] | None:
        """The ``waiting_power`` event when the value or its source changed since the last one (else None)."""
        value, source = self._current()
        key = (round(value, 1), source)
        if key == self._logged:
            return None
        self._logged = key
        return {"waiting_power_w": value, "source": source}
