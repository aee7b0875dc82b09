"""What the engine needs of the things it drives: small declared protocols.

The engine calls nothing else on them, so anything with these methods will
do: the real ``SignalChain``, ``Monitor`` and ``ActuatorSet``, the advisory
actuators, the simulator's replayed signal, a test double. Optional extras
(``held_power_w``, ``at_step_boundary``, ``unrestored_count``...) are read with
``getattr`` where they are used and are not part of the contract.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from greentrain.policies.base import Decision
from greentrain.signals.base import IntensityPoint

__all__ = ["CarbonSignal", "EnergyMonitor", "Actuators"]


@runtime_checkable
class CarbonSignal(Protocol):
    """A zone's carbon intensity: the latest value, a forecast, and how fresh the source is."""

    def latest(self) -> IntensityPoint:
        """The current intensity (may raise: the engine falls back and says so)."""
        ...

    def forecast(self, horizon_h: int = 72) -> list[IntensityPoint]:
        """Hourly points from now on, up to ``horizon_h`` hours."""
        ...

    def status(self) -> Any:
        """Which provider answered and how stale it is (``signals.base.ProviderStatus``)."""
        ...


@runtime_checkable
class EnergyMonitor(Protocol):
    """Energy per training step and the current draw of the job's devices."""

    def step_begin(self) -> None:
        """Mark the start of a step."""
        ...

    def step_end(self) -> Any:
        """Energy of the step since ``step_begin`` (``energy_j`` and its ``source``)."""
        ...

    def power_w(self) -> float:
        """Current draw of every measured device, watts."""
        ...

    def total_energy_j(self) -> float:
        """Energy since the monitor started, joules."""
        ...


@runtime_checkable
class Actuators(Protocol):
    """Hardware knobs behind a decision: applied, and restored on every exit path."""

    def apply(self, decision: Decision) -> list[str]:
        """Apply the decision's settings; the names of the knobs that changed. Never raises."""
        ...

    def restore_all(self) -> list[str]:
        """Put every changed setting back; the failures (also logged)."""
        ...
