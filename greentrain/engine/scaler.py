"""What the engine needs from an elastic job's replica actuator (carbon scaling; see ``engine/scaling.py``)."""

from __future__ import annotations

from typing import Protocol

from greentrain.policies.scaling_profile import ScalingProfile

__all__ = ["ReplicaScaler"]


class ReplicaScaler(Protocol):
    """What the engine needs from an elastic job's replica actuator."""

    min_replicas: int
    max_replicas: int | None

    @property
    def profile(self) -> ScalingProfile:
        """The counts the job may run at, with their throughput and power (the latest estimate)."""
        ...

    @property
    def replicas(self) -> int:
        """The count running now; the engine's measured step time is at this count."""
        ...

    def request(self, replicas: int, reason: str) -> bool:
        """Ask for ``replicas`` from the next step boundary on; False when it cannot be done (said why)."""
        ...
