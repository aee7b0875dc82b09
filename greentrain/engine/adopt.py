"""Adopting a decision on every rank: hardware settings, job state, counters and the event log.

``Adopter`` owns the decision in force and what the run log last said about it
(repeated identical run-now decisions are not logged again). Actuator failures
are the actuators' to report (they never raise); what they applied and refused
is mirrored into ``JobStats`` for the exporter's alerts.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from greentrain.engine.advice import advise, is_advisory
from greentrain.engine.collaborators import CountsRefusals, StepBoundary
from greentrain.engine.decider import RUN
from greentrain.engine.resumenotice import MOVE_MIN_S
from greentrain.engine.scaling import adopt_replicas
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["Adopter", "acted_on", "sync_actuator_stats"]

_FIGURE = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


class Adopter:
    """Acts on each (broadcast) decision; ``current`` is the last one that changed something."""

    def __init__(self) -> None:
        self.current: Decision = RUN
        self._logged: tuple[Action, str] = (Action.RUN, "")
        """The last RUN decision logged: its action and its reason with the figures blanked (``_shape``)."""
        self.continuing: datetime | None = None
        """The resume an earlier process of this job announced for the checkpoint pause it left in (set on
        a relaunch): this process's first pause continues that wait, it is not another pause."""

    def adopt(self, engine: EngineCore, decision: Decision, now: datetime) -> None:
        """All ranks: record ``decision``, apply hardware settings, log and count it."""
        actuators, stats = engine.io.actuators, engine.io.job_stats
        if isinstance(actuators, StepBoundary):  # the safe point where an exit signal's restore runs
            engine.guarded("actuators.at_step_boundary", actuators.at_step_boundary)
        continued, self.continuing = self.continuing, None  # only the relaunch's first decision continues
        if decision == RUN:
            return
        self.current = decision
        adopt_replicas(engine, decision, now)
        applied: list[str] = []
        wants_hardware = (decision.power_limit_w is not None or decision.sm_clocks_mhz is not None
                          or decision.precision is not None)
        advisory = is_advisory(engine)
        if advisory and wants_hardware:
            advise(engine, decision)  # logged, counted and exported; nothing applied
        elif actuators is not None and wants_hardware:
            applied = list(engine.guarded("actuators.apply", actuators.apply, decision) or [])
        changes: dict[str, object] = {}
        if decision.power_limit_w is not None and (actuators is None or "power_limit" in applied):
            changes["power_limit_w"] = decision.power_limit_w
        if decision.precision is not None and not advisory:
            changes["precision"] = decision.precision
        if changes:
            stats.update(**changes)
        for name in applied:
            stats.count_action(name)
        if actuators is not None:
            sync_actuator_stats(engine)
        until = decision.until
        if decision.action != Action.PAUSE:
            continued = None
        if decision.action != Action.RUN:
            if continued is None:
                stats.count_action(decision.action.value)
            state = JobState.WAITING if decision.action == Action.DELAY_START else JobState.PAUSED
            until = engine.resume_of(decision, now) or until  # the one resume the terminal and summary give
            engine.set_state(state, now, until=until)
        if continued is not None:
            _log_continued(engine, decision, now, until, continued)
            return
        logged = (decision.action, _shape(decision.reason))
        if decision.action != Action.RUN or applied or logged != self._logged:
            # Repeated run-now decisions that differ only in their figures would only add noise to the log.
            self._logged = logged
            look = {"next_look": decision.until} if until != decision.until and decision.until is not None else {}
            engine.io.event_log.write("action", now, action=decision.action.value, reason=decision.reason,
                                      until=until, **look, power_limit_w=decision.power_limit_w,
                                      precision=decision.precision, applied=applied,
                                      **({"plan_saving_g": decision.plan_saving_g}
                                         if decision.plan_saving_g is not None else {}),
                                      **({"replicas": decision.replicas} if decision.replicas is not None else {}),
                                      **({"advisory": True} if advisory else {}))
        work_s = engine.progress.work_remaining_s()
        if work_s is not None:
            stats.update(projected_finish=max(now, until or now) + timedelta(seconds=work_s))


def _log_continued(engine: EngineCore, decision: Decision, now: datetime, until: datetime | None,
                   announced: datetime) -> None:
    """A relaunch inside a checkpoint pause waits on: one wait, one ``pause`` action in the run log. Only a
    resume that moved from the one announced is logged, as the waiter logs a move (``replan``)."""
    if until is None or abs((until - announced).total_seconds()) < MOVE_MIN_S:
        return
    engine.io.event_log.write("action", now, action="replan", reason=decision.reason or "re-planned", until=until,
                              previous_until=announced, next_look=decision.until)


def _shape(reason: str) -> str:
    """A reason with its figures blanked: 'run at 139 g/kWh' and 'run at 142 g/kWh' say the same thing."""
    return _FIGURE.sub("#", reason)


def acted_on(engine: EngineCore, decision: Decision) -> Decision:
    """What the caller acts on: in advisory mode the timing only (no precision switch in the loop)."""
    if not is_advisory(engine):
        return decision
    from greentrain.actuators.advisory import without_knobs

    return without_knobs(decision)


def sync_actuator_stats(engine: EngineCore) -> None:
    """Mirror refusals and unrestored settings into JobStats for the exporter's alerts."""
    actuators = engine.io.actuators
    if not isinstance(actuators, CountsRefusals):
        return
    changes = {"power_cap_refused_total": int(sum(dict(actuators.refused_total).values()))}
    count = engine.guarded("actuators.unrestored_count", actuators.unrestored_count)
    if isinstance(count, int):
        changes["settings_unrestored"] = count
    engine.io.job_stats.update(**changes)
