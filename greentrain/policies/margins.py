"""The margins the timing policies share, declared once: the room kept before the deadline, and the saving
a pause must clear.

``forecast-optimal`` (and ``carbon-aware``), ``threshold`` and ``best-window``
configs inherit these fields, their defaults, docstrings and checks, so a
policy file's ``safety_z = 11`` gets the same reason from every kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.errors import ConfigError

__all__ = ["DeadlineRoom", "PauseMargins"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadlineRoom:
    """Time a plan keeps free before the deadline."""

    safety_z: float = 2.0
    """Plan for steps this many standard deviations (measured) slower than their mean."""
    reserve_s: float = 0.0
    """Fixed time kept free before the deadline, seconds."""

    def __post_init__(self) -> None:
        if not 0 <= self.safety_z <= 10:
            raise ConfigError(f"safety_z: must be in [0, 10] standard deviations, got {self.safety_z}")
        if self.reserve_s < 0:
            raise ConfigError(f"reserve_s: must be >= 0 seconds, got {self.reserve_s}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseMargins(DeadlineRoom):
    """The deadline's room, and the margin for forecast error a pause must clear."""

    min_pause_saving: float = 0.02
    """Margin for forecast error: pause a started job only if the expected net saving (waiting and resume
    included) exceeds this fraction of what running the current interval would emit (a delayed first start
    needs only > 0)."""

    def __post_init__(self) -> None:
        DeadlineRoom.__post_init__(self)  # named: slotted dataclasses are rebuilt, so bare super() breaks
        if not 0 <= self.min_pause_saving <= 1:
            raise ConfigError(f"min_pause_saving: must be in [0, 1] (a fraction), got {self.min_pause_saving}")
