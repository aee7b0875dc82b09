"""The engine's seam for carbon scaling: the replica count from a Decision to the job's replica actuator.

An elastic job gives its engine a ``Scaling`` (``engine/scaler.py``): its
``ReplicaScaler`` (``build_job(scaler=...)``, ``Session.scaler``: the measured scaling profile and the
count running now) and the allowed range (``JobOptions.min_replicas`` /
``max_replicas``). The decider copies them into the ``Snapshot`` so the policy
can plan a count per interval; ``adopt_replicas`` hands a RUN decision's new
count to ``request``, which the runtime (checkpoint, relaunch at the new world
size, reshard) or an external launcher acts on. A pause needs nothing here:
the pause itself is the release. Without a scaler nothing changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from greentrain.engine.scaler import ReplicaScaler, Scaling
from greentrain.policies.base import Action, Decision

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["ReplicaScaler", "Scaling", "adopt_replicas"]  # ReplicaScaler, Scaling: re-exported


def adopt_replicas(engine: EngineCore, decision: Decision, now: datetime) -> None:
    """All ranks (the decision is the leader's, shared): record the planned count and ask the scaler for the
    change a RUN decision wants, so every rank stops at the same step."""
    scaling = engine.scaling
    if scaling is None or decision.replicas is None:
        return
    stats = engine.io.job_stats
    if stats.replicas_planned != decision.replicas and engine.is_leader:
        engine.event("replicas", kind="planned", replicas=decision.replicas, reason=decision.reason)
    stats.update(replicas_planned=decision.replicas)
    scaler = scaling.scaler
    current, wanted = scaler.replicas, decision.replicas
    if decision.action != Action.RUN or wanted in (0, current):
        return  # a pause releases the replicas by itself; the guard's forced RUN keeps the count
    accepted = engine.guarded("scaler.request", scaler.request, wanted, decision.reason)
    stats.count_action("rescale")
    if engine.is_leader:
        engine.event("rescale", replicas_from=current, replicas_to=wanted, accepted=bool(accepted),
                     reason=decision.reason, at=now.isoformat())
