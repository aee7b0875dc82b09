"""Lower the SM clocks of pipeline stages that are off the critical path (the Perseus/EnvPipe idea).

In a pipeline, stages that finish their work early wait for the slowest one.
Running them at a lower clock fills that slack at lower power without making
the iteration longer. Input: per stage, the measured forward/backward time
and power at each clock (``StageProfile``). The planner starts with every
stage at its top clock and greedily takes the single-stage clock step that
saves the most energy per second of iteration time it adds (steps that add
none first) while the simulated iteration stays within ``tolerance`` of the
all-max baseline, until no step saves energy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from greentrain.errors import ConfigError
from greentrain.stageclocks.schedule import Schedule, simulate

__all__ = ["ClockPoint", "StageProfile", "StageClockPlan", "plan_stage_clocks", "iteration_energy_j"]


@dataclass(frozen=True, slots=True)
class ClockPoint:
    """One stage measured at one max SM clock."""

    clock_mhz: int
    forward_s: float
    backward_s: float
    power_w: float
    """Board power while computing, watts."""


@dataclass(frozen=True, slots=True)
class StageProfile:
    """All clocks measured for one stage, plus its power while waiting."""

    points: tuple[ClockPoint, ...]
    idle_power_w: float

    def __post_init__(self) -> None:
        if not self.points:
            raise ConfigError("StageProfile.points: at least one measured clock is needed")
        if len({p.clock_mhz for p in self.points}) != len(self.points):
            raise ConfigError("StageProfile.points: each clock once")
        object.__setattr__(self, "points", tuple(sorted(self.points, key=lambda p: -p.clock_mhz)))


@dataclass(frozen=True, slots=True)
class StageClockPlan:
    """Chosen clock per stage and what it does to time and energy per iteration."""

    clocks_mhz: tuple[int, ...]
    iteration_s: float
    baseline_iteration_s: float
    energy_j: float
    baseline_energy_j: float
    steps: list[str] = field(default_factory=list)
    """Accepted moves, for logs."""

    @property
    def slowdown(self) -> float:
        return self.iteration_s / self.baseline_iteration_s - 1.0

    @property
    def energy_saving(self) -> float:
        return 1.0 - self.energy_j / self.baseline_energy_j


def iteration_energy_j(profiles: Sequence[StageProfile], choice: Sequence[int], microbatches: int,
                       schedule: Schedule = "1f1b") -> tuple[float, float]:
    """(iteration seconds, energy joules) with stage s at ``profiles[s].points[choice[s]]``."""
    points = [prof.points[i] for prof, i in zip(profiles, choice)]
    timeline = simulate([p.forward_s for p in points], [p.backward_s for p in points], microbatches, schedule)
    energy_j = 0.0
    for prof, point, busy_s in zip(profiles, points, timeline.busy_s):
        energy_j += point.power_w * busy_s + prof.idle_power_w * (timeline.iteration_s - busy_s)
    return timeline.iteration_s, energy_j


def _best_move(profiles: Sequence[StageProfile], choice: list[int], microbatches: int, schedule: Schedule,
               bound_s: float, energy_j: float, time_s: float) -> tuple[int, float, float] | None:
    """The one-step clock drop with the most energy saved per second of iteration time added (free ones first)."""
    best: tuple[float, int, float, float] | None = None  # (score, stage, time, energy)
    for s, prof in enumerate(profiles):
        if choice[s] + 1 >= len(prof.points):
            continue
        trial = choice.copy()
        trial[s] += 1
        t, e = iteration_energy_j(profiles, trial, microbatches, schedule)
        if t > bound_s + 1e-12 or e >= energy_j:
            continue
        added_s = max(t - time_s, 0.0)
        score = (energy_j - e) / added_s if added_s > 1e-12 else float("inf")
        if best is None or (score, energy_j - e) > (best[0], energy_j - best[3]):
            best = (score, s, t, e)
    return None if best is None else (best[1], best[2], best[3])


def plan_stage_clocks(profiles: Sequence[StageProfile], microbatches: int, *, schedule: Schedule = "1f1b",
                      tolerance: float = 0.01) -> StageClockPlan:
    """Greedy energy descent under an iteration-time bound of ``(1 + tolerance) x`` the all-max baseline."""
    if not profiles:
        raise ConfigError("plan_stage_clocks: no stages")
    if not 0 <= tolerance < 1:
        raise ConfigError(f"tolerance: must be in [0, 1), got {tolerance}")
    choice = [0] * len(profiles)
    base_s, base_j = iteration_energy_j(profiles, choice, microbatches, schedule)
    bound_s = base_s * (1 + tolerance)
    energy_j, time_s, steps = base_j, base_s, []
    while True:
        move = _best_move(profiles, choice, microbatches, schedule, bound_s, energy_j, time_s)
        if move is None:
            break
        s, time_s, energy_j = move
        choice[s] += 1
        steps.append(f"stage {s} -> {profiles[s].points[choice[s]].clock_mhz} MHz")
    clocks = tuple(prof.points[i].clock_mhz for prof, i in zip(profiles, choice))
    return StageClockPlan(clocks, time_s, base_s, energy_j, base_j, steps)
