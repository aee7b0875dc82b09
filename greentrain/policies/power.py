"""Power policies: pick an operating point from the measured profile.

``energy-optimal`` minimises joules per unit of work; ``max-slowdown`` does so
among points at most ``max_slowdown`` slower than the fastest. Alone they
always run; combined with a timing policy (``[power]`` in a policy file, see
``CompositePolicy``) the timing policy plans with the chosen point's speed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.policies.base import Action, Decision, OperatingPoint, Policy, Snapshot
from greentrain.policies.configured import ConfiguredPolicy
from greentrain.policies.settings import PolicySettings
from greentrain.policies.window import capacity_s, horizon_end, safety_margin_s

__all__ = [
    "CompositePolicy",
    "EnergyOptimalConfig",
    "EnergyOptimalPolicy",
    "MaxSlowdownConfig",
    "MaxSlowdownPolicy",
]


def _usable(snapshot: Snapshot) -> list[OperatingPoint]:
    return [p for p in snapshot.operating_points if p.relative_speed > 0 and p.power_w > 0]


def _least_energy(points: list[OperatingPoint]) -> OperatingPoint:
    # Energy per unit of work is power / speed; ties go to the faster point.
    return min(points, key=lambda p: (p.power_w / p.relative_speed, -p.relative_speed))


def _point_decision(point: OperatingPoint | None, reason: str) -> Decision:
    if point is None:
        return Decision(action=Action.RUN, reason=f"{reason}: no measured operating points; limit unchanged")
    return Decision(
        action=Action.RUN,
        power_limit_w=point.power_limit_w,
        sm_clocks_mhz=point.sm_clocks_mhz,
        reason=f"{reason}: {point.power_w / point.relative_speed:.0f} J per full-speed second",
    )


class _PointPolicy(ConfiguredPolicy):
    """A power policy: always run, at the operating point ``choose`` picks among the usable ones."""

    power_use = "power"

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        ensure_aware_utc(now, "now")
        points = _usable(snapshot)
        return _point_decision(self.choose(points) if points else None, self.name)

    def choose(self, points: list[OperatingPoint]) -> OperatingPoint:
        """The point to run at among ``points`` (not empty)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class EnergyOptimalConfig:
    """energy-optimal has no parameters."""


class EnergyOptimalPolicy(_PointPolicy):
    """Always run, at the point with the least energy per unit of work."""

    name = "energy-optimal"
    Config = EnergyOptimalConfig

    def choose(self, points: list[OperatingPoint]) -> OperatingPoint:
        return _least_energy(points)


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxSlowdownConfig:
    """Least energy among points no more than ``max_slowdown`` slower than the fastest."""

    max_slowdown: float = 0.1
    """Allowed extra time per unit of work, as a fraction (0.1 = at most 10 % slower)."""

    def __post_init__(self) -> None:
        if not 0 <= self.max_slowdown <= 10:
            raise ConfigError(f"max_slowdown: must be in [0, 10] (a fraction), got {self.max_slowdown}")


class MaxSlowdownPolicy(_PointPolicy):
    """Always run, at the least-energy point within the slowdown bound."""

    name = "max-slowdown"
    Config = MaxSlowdownConfig

    def choose(self, points: list[OperatingPoint]) -> OperatingPoint:
        floor = max(p.relative_speed for p in points) / (1.0 + self.config.max_slowdown)
        return _least_energy([p for p in points if p.relative_speed >= floor * (1 - 1e-9)])


class CompositePolicy(Policy):
    """A timing policy that plans with the operating point a power policy picks.

    The timing policy sees only the chosen point, so its deadline arithmetic
    uses that point's speed; if even flat-out running at that point would
    miss the deadline, the fastest point is used instead.
    """

    power_use = "timing+power"

    def __init__(self, timing: Policy, power: Policy, *, settings: PolicySettings | None = None) -> None:
        self.timing = timing
        self.power = power
        self.name = f"{timing.name}+{power.name}"  # type: ignore[misc]
        if settings is not None:
            self.settings = settings

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        now = ensure_aware_utc(now, "now")
        chosen = self.power.decide(snapshot, now)
        points = _usable(snapshot)
        point = next((p for p in points if p.power_limit_w == chosen.power_limit_w), None)
        if point is not None and not self._fits(snapshot, now, point, self._margin_z()):
            point = max(points, key=lambda p: p.relative_speed)
            chosen = _point_decision(point, f"{self.power.name} overridden for the deadline")
        narrowed = replace(snapshot, operating_points=(point,)) if point is not None else snapshot
        decision = self.timing.decide(narrowed, now)
        if decision.action != Action.RUN:
            return decision
        return replace(
            decision,
            power_limit_w=chosen.power_limit_w,
            sm_clocks_mhz=chosen.sm_clocks_mhz,
            reason=f"{decision.reason}; {chosen.reason}",
        )

    def _margin_z(self) -> tuple[float, float]:
        from greentrain.policies.forecast_optimal import ForecastOptimalConfig  # the timing policy with a margin

        config = self.timing.config if isinstance(self.timing, ConfiguredPolicy) else None
        if isinstance(config, ForecastOptimalConfig):
            return config.safety_z, config.reserve_s
        return 2.0, 0.0

    @staticmethod
    def _fits(snapshot: Snapshot, now: datetime, point: OperatingPoint, margin: tuple[float, float]) -> bool:
        """Whether running flat out at ``point`` still finishes with the timing policy's margin."""
        end = horizon_end(snapshot, now)
        if snapshot.deadline is None or end is None:
            return True
        need_s = snapshot.work_remaining_s + safety_margin_s(snapshot, *margin)
        return capacity_s(snapshot, now, end, point.relative_speed) >= need_s

    def __repr__(self) -> str:
        return f"CompositePolicy({self.timing!r}, {self.power!r})"
