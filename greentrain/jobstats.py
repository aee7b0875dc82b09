"""Live job state shared by the engine (writer) and the exporters (readers).

One small mutable object, passed in explicitly; no globals. Writes happen at
step boundaries, reads from the exporter thread; a lock keeps snapshots whole.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

__all__ = ["JobState", "JobStats"]


class JobState(StrEnum):
    """What the job is doing right now."""

    RUNNING = "running"
    PAUSED = "paused"
    WAITING = "waiting"  # delayed start, not yet begun


@dataclass(slots=True, kw_only=True)
class JobStats:
    """Counters and gauges of one training job (the ``job`` label)."""

    job: str = "greentrain"
    state: JobState = JobState.WAITING
    steps_total: int = 0
    tokens_total: int = 0
    energy_j: float = 0.0
    emissions_g: float = 0.0
    emissions_avoided_g: float = 0.0
    """Versus run-now at default settings, from the same cost model; net: the draw while paused and
    the resume overheads count against it."""
    waiting_energy_j: float = 0.0
    """Energy the held devices drew while the job was paused or waiting to start."""
    budget_remaining_g: float | None = None
    """``max_emissions_g`` minus what the job has emitted (None without a carbon budget)."""
    budget_projected_g: float | None = None
    """Projected total emissions of the job (None without a carbon budget)."""
    waiting_power_w: float = 0.0
    """What a pause is expected to draw (``Snapshot.waiting_power_w``), watts (0 until the first wait)."""
    actions_total: Counter[str] = field(default_factory=Counter)
    power_limit_w: float | None = None
    precision: str | None = None
    deadline: datetime | None = None
    projected_finish: datetime | None = None
    settings_unrestored: int = 0
    """GPU settings this job changed whose restore failed (or is pending after exit); feeds an alert."""
    power_cap_refused_total: int = 0
    """Power-limit/clock changes refused for lack of privilege (exporters: power_cap_refused_total)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def update(self, **changes: object) -> None:
        """Set fields atomically with respect to ``snapshot``."""
        with self._lock:
            for key, value in changes.items():
                if not hasattr(self, key) or key.startswith("_"):
                    raise AttributeError(f"JobStats has no field {key!r}")
                setattr(self, key, value)

    def count_action(self, action: str, n: int = 1) -> None:
        """Increment ``policy_actions_total{action}``."""
        with self._lock:
            self.actions_total[action] += n

    def add(self, *, steps: int = 0, tokens: int = 0, energy_j: float = 0.0,
            emissions_g: float = 0.0, emissions_avoided_g: float = 0.0) -> None:
        """Add to the monotonic counters."""
        with self._lock:
            self.steps_total += steps
            self.tokens_total += tokens
            self.energy_j += energy_j
            self.emissions_g += emissions_g
            self.emissions_avoided_g += emissions_avoided_g

    def snapshot(self) -> "JobStats":
        """A consistent copy for readers."""
        with self._lock:
            return replace(self, actions_total=Counter(self.actions_total), _lock=threading.Lock())
