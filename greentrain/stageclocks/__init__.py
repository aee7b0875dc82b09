"""Pipeline stage clocks: slow down stages off the critical path without lengthening the iteration.

Measure each stage (``StageTimer``, ``profile_stage``), plan
(``plan_stage_clocks`` on the ``simulate``d 1F1B/GPipe timeline) and apply
through each stage's ``ActuatorSet`` (``apply_plan``).
"""

from greentrain.stageclocks.measure import StageTimer, apply_plan, profile_stage
from greentrain.stageclocks.clock_planner import (
    ClockPoint,
    StageClockPlan,
    StageProfile,
    iteration_energy_j,
    plan_stage_clocks,
)
from greentrain.stageclocks.schedule import Schedule, Timeline, simulate, stage_order

__all__ = [
    "ClockPoint",
    "StageProfile",
    "StageClockPlan",
    "plan_stage_clocks",
    "iteration_energy_j",
    "StageTimer",
    "profile_stage",
    "apply_plan",
    "Schedule",
    "Timeline",
    "simulate",
    "stage_order",
]
