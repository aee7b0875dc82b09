"""The engine as its parts see it: one typed view, so no part imports the loop.

``loop.Engine`` satisfies ``EngineCore`` structurally. The parts (``decider``,
``adopt``, ``advice``, ``waiter``, ``pausemode``, ``budget``, ``jobsummary``) and
the job's assembly code are typed against it; the loop imports them, never
the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from greentrain.clock import Clock
from greentrain.engine.broadcast import Broadcast
from greentrain.engine.collaborators import Actuators, EnergyMonitor
from greentrain.engine.deadlinewatch import DeadlineVerdict, DeadlineWatch
from greentrain.engine.ledger import CarbonLedger
from greentrain.engine.scaler import ReplicaScaler
from greentrain.engine.signalview import SignalView
from greentrain.engine.stats import StepTimes
from greentrain.engine.waiting import WaitingPower
from greentrain.events import EventLog
from greentrain.jobstats import JobState, JobStats
from greentrain.policies.base import Action, Decision, OperatingPoint, Policy, Snapshot

__all__ = ["EngineCore", "JobBudget"]


class JobBudget(Protocol):
    """The job's carbon and energy limits, as the decider consults them (``budget.Budget``)."""

    max_emissions_g: float | None
    max_energy_j: float | None

    def stopping(self, engine: EngineCore) -> bool:
        """Whether a budget is spent and the job must stop at this step."""
        ...

    def shift(self, engine: EngineCore, decision: Decision, snapshot: Snapshot, now: datetime) -> Decision:
        """The decision, or a net-saving pause while the projection exceeds a budget (``on_budget='shift'``)."""
        ...

    def check(self, engine: EngineCore, decision: Decision, snapshot: Snapshot | None, now: datetime) -> Decision:
        """The decision, or a stop at a checkpoint once a budget is spent; warns once on the way."""
        ...


class EngineCore(Protocol):
    """State and services of one job's engine shared with its parts (see ``loop.Engine`` for each)."""

    policy: Policy
    clock: Clock
    signals: SignalView
    monitor: EnergyMonitor | None
    actuators: Actuators | None
    broadcast: Broadcast
    event_log: EventLog | None
    job_stats: JobStats
    ledger: CarbonLedger
    times: StepTimes
    waiting: WaitingPower
    budget: JobBudget
    deadline_watch: DeadlineWatch
    deadline_verdict: DeadlineVerdict | None
    deadline: datetime | None
    deadline_policy: str
    decide_interval_s: float
    resume_overhead_s: float
    operating_points: tuple[OperatingPoint, ...]
    rate_probe: Callable[[], float | None] | None
    scaler: ReplicaScaler | None
    decision: Decision
    state: JobState
    notes: list[str]
    steps_done: int
    steps_total: int | None
    work_total_s: float | None
    running_s: float
    first_start: datetime | None
    submitted_at: datetime | None
    finished_at: datetime | None
    best_effort: bool
    guard_engaged: bool
    next_decide_at: datetime | None
    decided_on: tuple
    last_logged: tuple[Action, str]
    last_step_s: float | None
    last_step_energy_j: float | None

    @property
    def is_leader(self) -> bool: ...

    @property
    def finished(self) -> bool: ...

    def work_remaining_s(self, pessimistic: bool = False) -> float | None: ...

    def latest_safe_resume(self) -> datetime | None: ...

    def replan_paused(self, now: datetime, force: bool = True) -> datetime | None: ...

    def set_state(self, state: JobState, now: datetime, until: datetime | None = None) -> None: ...

    def mark_running(self, now: datetime) -> None: ...

    def mark_unpriced(self, entry: Any) -> None: ...

    def power_w(self) -> float | None: ...

    def held_power_w(self) -> float | None: ...

    def guarded(self, what: str, fn: Any, *args: Any) -> Any: ...

    def note(self, message: str) -> None: ...

    def event(self, event: str, **fields: Any) -> None: ...

    def close(self, **summary: Any) -> None: ...
