"""Carbon and energy budgets: project the job's total, warn once, stop at a checkpoint when spent.

A job may set ``max_emissions_g`` and/or ``max_energy_j``. At every decision
the leader projects the job's total: what it has spent (running and waiting,
from the engine's ledger) plus the remaining work at its measured energy per
running second, priced at the mean known/forecast intensity over the time it
still needs. When the projection first exceeds a budget it warns once (a note
on the terminal and in the run log) and the metrics carry the remaining and
projected figures (``greentrain_job_budget_remaining_grams``,
``greentrain_job_budget_projected_grams``). With ``on_budget="stop"`` (the
default) a spent budget turns the decision into ``Action.STOP``: the job saves
a checkpoint and exits with ``BUDGET_EXIT_CODE``; ``"warn"`` only warns.

``"shift"`` keeps the job running to its deadline but, for as long as the
projection exceeds the budget, plans each interval net-optimally with no
margin for forecast error: whatever the job's own policy says, the interval is
paused (or the start delayed) whenever the carbon-aware planner
(``greentrain.policies.carbon_aware``, ``min_pause_saving=0``) expects a pause to
save emissions net of the held hardware's waiting draw and the resume, within
the deadline. It never stops the job; the deadline guard still wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from greentrain.exitcodes import BUDGET_SPENT_EXIT_CODE
from greentrain.policies.base import Action, Decision, Snapshot
from greentrain.policies.carbon_aware import CarbonAwareConfig, CarbonAwarePolicy
from greentrain.policies.settings import PolicySettings
from greentrain.units import J_PER_KWH

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["BUDGET_EXIT_CODE", "Budget", "ON_BUDGET"]

BUDGET_EXIT_CODE = BUDGET_SPENT_EXIT_CODE  # 4, distinct from a missed deadline (3)
"""Exit status of a job stopped at a checkpoint because its carbon or energy budget is spent."""
ON_BUDGET = ("stop", "warn", "shift")


@dataclass(slots=True)
class Budget:
    """Limits of one job and the state of its warning."""

    max_emissions_g: float | None = None
    max_energy_j: float | None = None
    on_budget: str | None = None
    """'stop': save a checkpoint and exit with ``BUDGET_EXIT_CODE`` once a budget is spent; 'warn': only warn;
    'shift': while the projection exceeds a budget, take every pause with a positive expected net saving.
    None: the policy's ``[settings] on_budget`` ('stop' unless it says otherwise)."""
    warned: bool = False
    projected_g: float | None = None
    projected_j: float | None = None
    planner: CarbonAwarePolicy | None = field(default=None, repr=False, compare=False)
    """The net-optimal planner of ``on_budget='shift'`` (created on first use; it caches its DP tail)."""

    @property
    def active(self) -> bool:
        return self.max_emissions_g is not None or self.max_energy_j is not None

    @property
    def mode(self) -> str:
        """What happens over budget: ``on_budget``, 'stop' when unset."""
        return self.on_budget or "stop"

    @classmethod
    def resolve(cls, given: Budget | None, settings: PolicySettings) -> Budget:
        """``given`` if it sets a limit (its ``on_budget`` defaulting to the policy's setting), else the
        limits of the policy's settings (none by default). The limits were checked where they were given
        (``JobOptions``, the policy file's ``[settings]``)."""
        if given is not None and given.active:
            return given if given.on_budget is not None else replace(given, on_budget=settings.on_budget)
        return cls(max_emissions_g=settings.max_emissions_g, max_energy_j=settings.max_energy_j,
                   on_budget=settings.on_budget)

    def project(self, engine: EngineCore, snapshot: Snapshot | None, now: datetime) -> tuple[float, float]:
        """(grams, joules) the whole job is projected to cost: spent + remaining work at the measured rate."""
        spent_g, spent_j = engine.ledger.emissions_g, engine.ledger.energy_j
        progress = engine.progress
        work_s = progress.work_remaining_s() or 0.0
        running_j = max(0.0, spent_j - engine.pause_cost.energy_j)
        rate_w = running_j / progress.running_s if progress.running_s > 0 else 0.0  # J per job-clock second
        left_j = rate_w * work_s
        return spent_g + left_j / J_PER_KWH * _mean_intensity(engine, snapshot, now, work_s), spent_j + left_j

    def check(self, engine: EngineCore, decision: Decision, snapshot: Snapshot | None, now: datetime) -> Decision:
        """Update the projection and metrics; warn once; STOP when a budget is spent (``on_budget='stop'``)."""
        if not self.active:
            return decision
        self.projected_g, self.projected_j = self.project(engine, snapshot, now)
        stats: dict[str, float | None] = {"budget_projected_g": self.projected_g if self.max_emissions_g else None}
        if self.max_emissions_g is not None:
            stats["budget_remaining_g"] = self.max_emissions_g - engine.ledger.emissions_g
        engine.io.job_stats.update(**stats)
        over = self._over(self.projected_g, self.projected_j)
        if over and not self.warned:
            self.warned = True
            engine.note(f"budget: projected {over}; " + _CONSEQUENCE[self.mode])
        spent = self.spent(engine)
        if spent and self.mode == "stop":
            return replace(decision, action=Action.STOP, until=None, reason=f"budget spent: {spent}")
        return decision

    def stopping(self, engine: EngineCore) -> bool:
        """True once a budget is spent and the job must stop at this step (``on_budget='stop'``)."""
        return self.active and self.mode == "stop" and bool(self.spent(engine))

    def shift(self, engine: EngineCore, decision: Decision, snapshot: Snapshot, now: datetime) -> Decision:
        """``on_budget='shift'``: while the projection exceeds a budget, pause a RUN interval whenever
        the net-optimal plan (no forecast-error margin) expects the pause to save emissions."""
        if not self.active or self.mode != "shift" or decision.action != Action.RUN or decision.to_the_end:
            return decision
        over = self._over(*self.project(engine, snapshot, now))
        if not over:
            return decision
        if self.planner is None:
            self.planner = CarbonAwarePolicy(CarbonAwareConfig(min_pause_saving=0.0))
        planned = self.planner.decide(snapshot, now)
        if planned.action == Action.RUN:
            return decision
        return replace(planned, reason=f"budget shift (projected {over}): {planned.reason}")

    def spent(self, engine: EngineCore) -> str:
        """Why a budget is spent ('' while none is)."""
        return self._over(engine.ledger.emissions_g, engine.ledger.energy_j, spent=True)

    def _over(self, grams: float, joules: float, spent: bool = False) -> str:
        def exceeds(value: float, limit: float | None) -> bool:
            return limit is not None and (value >= limit if spent else value > limit)

        verb = "spent" if spent else "total"
        if exceeds(grams, self.max_emissions_g):
            return f"{verb} {grams:.3g} g of max_emissions_g {self.max_emissions_g:.3g} g"
        if exceeds(joules, self.max_energy_j):
            return f"{verb} {joules:.3g} J of max_energy_j {self.max_energy_j:.3g} J"
        return ""


_CONSEQUENCE = {"stop": "stopping at a checkpoint when it is spent", "warn": "warning only",
                "shift": "shifting work to cleaner hours within the deadline"}


def _mean_intensity(engine: EngineCore, snapshot: Snapshot | None, now: datetime, work_s: float) -> float:
    """Mean intensity over the next ``work_s`` (known and forecast points), else the current value."""
    points = []
    if snapshot is not None:
        end = now + timedelta(seconds=max(work_s, 1.0))
        points = [p for p in ((snapshot.carbon_now,) if snapshot.carbon_now else ()) + snapshot.forecast
                  if p.end > now and p.start < end]
    if points:
        return sum(p.intensity_g_per_kwh for p in points) / len(points)
    current = engine.ledger.intensity_at(now)
    return current if current is not None else 0.0
