"""An elastic job's replica actuator as the engine sees it (carbon scaling; see ``engine/scaling.py``).

``ReplicaScaler`` is what the job gives (``build_job(scaler=...)``, ``Session.scaler``): the counts it can
run at with their throughput and power, the count running now, and a way to ask
for another. ``Scaling`` pairs it with the job's allowed range
(``JobOptions.min_replicas``/``max_replicas``) and is what the engine holds.
Kept apart from ``scaling.py`` so ``core.py`` can name it without an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from greentrain.policies.base import Snapshot
from greentrain.policies.scaling_profile import ScalingProfile

__all__ = ["ReplicaScaler", "Scaling"]


class ReplicaScaler(Protocol):
    """What the engine needs from an elastic job's replica actuator."""

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


@dataclass(kw_only=True, slots=True)
class Scaling:
    """An elastic job's replica actuator and the range the policy may choose from."""

    scaler: ReplicaScaler
    min_replicas: int = 1
    """Fewest replicas while running (a pause, 0, is always allowed)."""
    max_replicas: int | None = None
    """Most replicas; None: the profile's largest count."""

    def plan_with(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with what the policy plans a count with: the profile, the running count (the measured
        step time's, so the work left is counted at it) and the range."""
        replicas = self.scaler.replicas
        return replace(snapshot, scaling=self.scaler.profile, replicas=replicas, work_replicas=replicas,
                       min_replicas=self.min_replicas, max_replicas=self.max_replicas)
