"""Advisory mode at a step boundary: log, count and export a decision's knobs instead of applying them.

Called by ``adopt`` when the engine's actuators are advisory
(``greentrain.actuators.advisory``). Each new advice becomes one ``advice``
event in the run log with the estimated effect of a power-limit change (from
the job's operating points: energy per unit of work and running time), and
the ``advised_*`` fields of ``JobStats`` that the exporter publishes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from greentrain.engine.collaborators import Advises
from greentrain.policies.base import Decision

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["advise", "advice_summary", "advisor", "is_advisory"]

PRECISION_NOT_ESTIMATED = ("not estimated: energy per step at another precision is only known after a trial, "
                           "and a trial switches precision, which advisory mode does not")


def advisor(engine: EngineCore) -> Advises | None:
    """The engine's actuators where they only advise, else None."""
    actuators = engine.io.actuators
    return actuators if isinstance(actuators, Advises) and actuators.advisory else None


def is_advisory(engine: EngineCore) -> bool:
    """Whether the engine's actuators only advise."""
    return advisor(engine) is not None


def advise(engine: EngineCore, decision: Decision) -> None:
    """Record ``decision``'s knobs as advice: event (when it changed), JobStats gauges; applies nothing."""
    actuators = advisor(engine)
    if actuators is None:
        return
    before = len(actuators.history)
    advice: dict[str, object] = engine.guarded("actuators.advise", actuators.advise, decision) or {}
    if not advice:
        return
    changes: dict[str, object] = {}
    if "power_limit_w" in advice:
        estimate = advice["estimate"] = _power_estimate(engine, advice)
        estimate = estimate or {}
        changes.update(advised_power_limit_w=advice["power_limit_w"],
                       advised_energy_change=estimate.get("energy_change"),
                       advised_time_change=estimate.get("time_change"))
    if "sm_clocks_mhz" in advice:
        low_high = advice["sm_clocks_mhz"]  # [low, high] MHz
        assert isinstance(low_high, (list, tuple)), low_high
        changes["advised_sm_clock_mhz"] = low_high[1]
    if "precision" in advice:
        advice["precision_estimate"] = PRECISION_NOT_ESTIMATED
        changes["advised_precision"] = advice["precision"]
    engine.io.job_stats.update(**changes)
    if len(actuators.history) > before:  # a new advice, not a repeat
        engine.io.job_stats.count_action("advised")
        engine.event("advice", **advice)


def _power_estimate(engine: EngineCore, advice: dict[str, object]) -> dict[str, object] | None:
    from greentrain.profiler.estimate import estimated_effect

    advised_w, current_w = advice["power_limit_w"], advice.get("current_power_limit_w")
    assert isinstance(advised_w, (int, float)) and (current_w is None or isinstance(current_w, (int, float)))
    effect = estimated_effect(engine.operating_points, advised_w, current_w)
    if effect is None:
        return None
    actuators = advisor(engine)
    source = (actuators.points_source if actuators is not None else None) or "measured"
    return {**effect, "source": "estimated", "points": source}


def advice_summary(engine: EngineCore) -> dict[str, object] | None:
    """The job's last advice per knob for the summary event (None outside advisory mode)."""
    actuators = advisor(engine)
    if actuators is None:
        return None
    stats = engine.io.job_stats.snapshot()
    return {"power_limit_w": stats.advised_power_limit_w, "sm_clock_max_mhz": stats.advised_sm_clock_mhz,
            "precision": stats.advised_precision, "energy_change": stats.advised_energy_change,
            "time_change": stats.advised_time_change, "estimate_source": "estimated",
            "advices": len(actuators.history), "applied": 0}
