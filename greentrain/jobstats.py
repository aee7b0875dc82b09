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
    unpriced_energy_j: float = 0.0
    """Energy spent with no carbon intensity known: while > 0 the emissions are unknown."""
    emissions_unknown_reason: str | None = None
    """Why emissions are unknown (no signal configured, unknown zone, provider failing)."""
    last_step_energy_j: float | None = None
    last_step_source: str | None = None
    """Where the last step's energy came from: 'measured', or 'interpolated' for a step under 0.2 s."""
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
    advised_power_limit_w: float | None = None
    """Advisory mode: the power limit the policy advised (not applied), watts."""
    advised_sm_clock_mhz: int | None = None
    """Advisory mode: the top of the SM clock range advised (not applied), MHz."""
    advised_precision: str | None = None
    """Advisory mode: the precision advised (not switched to)."""
    advised_energy_change: float | None = None
    """Advisory mode: estimated relative change of energy per unit of work at the advised limit (-0.1 = -10 %)."""
    advised_time_change: float | None = None
    """Advisory mode: estimated relative change of running time at the advised limit."""
    replicas_planned: int | None = None
    """Carbon scaling: the replica count the policy chose for this interval (0 = paused); None = not elastic."""
    replicas_actual: int | None = None
    """Carbon scaling: the replica count running now (0 = paused or released); None = not elastic."""
    expert_tokens_total: Counter[str] = field(default_factory=Counter)
    """Mixture of experts: tokens the routers sent to each expert (by expert index), summed over blocks."""
    expert_imbalance: float | None = None
    """Mixture of experts: last step's busiest expert's tokens over the mean, worst block (1.0 = balanced)."""
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
            emissions_g: float | None = 0.0, emissions_avoided_g: float = 0.0) -> None:
        """Add to the monotonic counters; ``emissions_g=None``: ``energy_j`` could not be priced."""
        with self._lock:
            self.steps_total += steps
            self.tokens_total += tokens
            self.energy_j += energy_j
            if emissions_g is None:
                self.unpriced_energy_j += energy_j
            else:
                self.emissions_g += emissions_g
                self.emissions_avoided_g += emissions_avoided_g

    def add_expert_tokens(self, tokens_per_expert: list[int], imbalance: float | None) -> None:
        """Add one step's router statistics (tokens per expert index) and set the imbalance."""
        with self._lock:
            for index, tokens in enumerate(tokens_per_expert):
                self.expert_tokens_total[str(index)] += tokens
            self.expert_imbalance = imbalance

    @property
    def emissions_known(self) -> bool:
        """Whether every joule so far was priced (else emissions are unknown, never 0)."""
        return self.unpriced_energy_j <= 0.0

    def snapshot(self) -> "JobStats":
        """A consistent copy for readers."""
        with self._lock:
            return replace(self, actions_total=Counter(self.actions_total),
                           expert_tokens_total=Counter(self.expert_tokens_total), _lock=threading.Lock())
