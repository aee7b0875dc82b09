"""The engine as its parts see it: one typed view, so no part imports the loop.

``loop.Engine`` satisfies ``EngineCore`` structurally. Each part owns its own
state and reads the others' through this view: ``progress`` (the loop's),
``deadline`` (the guard's, with its watch and verdict), ``pause_cost`` (the
waiting ledger), ``budget``, ``ledger`` (emissions) and ``signals`` (the carbon
signal as the engine sees it); the decider keeps its own state, reached
through ``replan_paused``. What every part needs besides is here too: the
clock and the objects the engine drives (``io``), and the three ways to
report (``note``, ``event``, ``guarded``). The parts (``decider``, ``adopt``,
``advice``, ``waiter``, ``pausemode``, ``budget``, ``jobsummary``) and the
job's assembly code are typed against it; the loop imports them, never the
other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol, TypeVar

from greentrain.clock import Clock
from greentrain.engine.collaborators import Collaborators
from greentrain.engine.deadline_guard import DeadlineGuard
from greentrain.engine.ledger import CarbonLedger, LedgerEntry
from greentrain.engine.pausecost import PauseCost
from greentrain.engine.progress import Progress
from greentrain.engine.carbonview import CarbonView
from greentrain.engine.scaler import Scaling
from greentrain.jobstats import JobState
from greentrain.policies.base import Decision, OperatingPoint, Policy, Snapshot

__all__ = ["EngineCore", "JobBudget"]

T = TypeVar("T")


class JobBudget(Protocol):
    """The job's carbon and energy limits, as the decider consults them (``budget.Budget``)."""

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
    """What one job's engine shares with its parts (see ``loop.Engine`` for each)."""

    policy: Policy
    clock: Clock
    io: Collaborators
    signals: CarbonView
    ledger: CarbonLedger
    progress: Progress
    deadline: DeadlineGuard
    pause_cost: PauseCost
    operating_points: tuple[OperatingPoint, ...]
    scaling: Scaling | None
    notes: list[str]
    logged_until: datetime | None

    @property
    def budget(self) -> JobBudget:
        """Read-only here, so the engine's concrete ``budget.Budget`` satisfies it (a mutable protocol
        attribute would have to be exactly ``JobBudget``)."""
        ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def state(self) -> JobState: ...

    @property
    def decision(self) -> Decision: ...

    @property
    def measures_energy(self) -> bool: ...

    @property
    def decide_interval_s(self) -> float: ...

    def replan_paused(self, now: datetime, force: bool = True) -> datetime | None: ...

    def set_state(self, state: JobState, now: datetime, until: datetime | None = None) -> None: ...

    def resume_of(self, decision: Decision, now: datetime | None = None) -> datetime | None: ...

    def mark_running(self, now: datetime) -> None: ...

    def charge(self, energy_j: float, at: datetime, counterfactual_at: datetime | None) -> LedgerEntry: ...

    def log_pause_cost(self) -> None: ...

    def power_w(self) -> float | None: ...

    def plan_power_w(self) -> tuple[float | None, str]: ...

    def last_decision(self) -> Decision: ...

    def guarded(self, what: str, fn: Callable[..., T], *args: object) -> T | None: ...

    def note(self, message: str) -> None: ...

    def event(self, event: str, **fields: object) -> None: ...
