"""What the slot planner (``policies/slot_planner.py``) plans with and returns: operating modes, slots of
constant carbon intensity, start states, and the plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum

__all__ = ["Mode", "Plan", "Slot", "StartState", "running_intervals"]


@dataclass(frozen=True, slots=True)
class Mode:
    """One way of running: progress per wall second (1.0 = full speed) and draw."""

    speed: float
    power_w: float
    power_limit_w: float | None = None
    sm_clocks_mhz: tuple[int, int] | None = None
    replicas: int | None = None
    """Carbon scaling: the replica count this mode runs at (None = not an elastic job)."""


@dataclass(frozen=True, slots=True)
class Slot:
    """An interval of known (or forecast) constant carbon intensity."""

    start: datetime
    end: datetime
    intensity_g_per_kwh: float

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()


class StartState(IntEnum):
    """Job state before the first slot: decides whether running first costs a resume."""

    FRESH = 0  # never started: the first start is free
    RUNNING = 1
    PAUSED = 2  # started, then paused: the next run pays the resume overhead


@dataclass(frozen=True, slots=True)
class Plan:
    """The chosen mode per slot (None = pause) and what it is expected to cost."""

    slots: tuple[Slot, ...]
    modes: tuple[Mode | None, ...]
    run_s: tuple[float, ...]
    """Seconds spent running (overhead included) in each slot."""
    emissions_g: float
    """Expected emissions of running, restarting and waiting (net)."""
    energy_j: float
    finish: datetime
    waiting_j: float = 0.0
    """Of ``energy_j``: drawn while paused after the first start."""
    pause_saving_g: float = 0.0
    """Expected emissions saved by pausing in the first slot instead of running in it (> 0 when the plan
    pauses there; < 0, what a pause would add, when it runs); policies compare it with their margin."""
    first_run_mode: Mode | None = None
    """The best mode to run at in the first slot, had the plan to run there."""
    changes: int = 0
    """Restarts the plan pays for (resumes after a pause, and replica-count changes)."""
    first_costs_g: dict[int, float] = field(default_factory=dict)
    """Expected emissions of the best plan that starts with each first-slot choice, by replica count
    (0 = pause); inf when that choice cannot meet the deadline."""

    def running_intervals(self) -> tuple[tuple[datetime, datetime], ...]:
        """Merged [start, end) intervals in which the job runs."""
        return running_intervals(self.slots, self.run_s)


def running_intervals(slots: Sequence[Slot], run_s: Sequence[float]) -> tuple[tuple[datetime, datetime], ...]:
    """Merged [start, end) intervals of running: ``run_s[i]`` seconds from the start of ``slots[i]``."""
    merged: list[tuple[datetime, datetime]] = []
    for slot, seconds in zip(slots, run_s):
        if seconds <= 0:
            continue
        end = slot.start + timedelta(seconds=seconds)
        if merged and merged[-1][1] == slot.start:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((slot.start, end))
    return tuple(merged)
