"""The engine's seam for carbon scaling: the replica count from a Decision to the job's replica actuator.

An elastic job gives its engine a ``ReplicaScaler`` (``JobParts.scaler``): the
measured scaling profile, the allowed range and the count running now. The
decider copies them into the ``Snapshot`` so the policy can plan a count per
interval; ``adopt`` hands a RUN decision's new count to ``request``, which
the runtime (checkpoint, relaunch at the new world size, reshard) or an
external launcher acts on. A pause needs nothing here: the pause itself is
the release. Without a scaler nothing changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from greentrain.policies.base import Action, Decision
from greentrain.engine.scaler import ReplicaScaler

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["ReplicaScaler", "adopt_replicas", "snapshot_fields"]  # ReplicaScaler: re-exported


def snapshot_fields(engine: EngineCore) -> dict[str, Any]:
    """The ``Snapshot`` keywords of an elastic job (none for a fixed-size one)."""
    scaler = engine.scaler
    if scaler is None:
        return {}
    replicas = scaler.replicas
    return {"scaling": scaler.profile, "replicas": replicas, "work_replicas": replicas,
            "min_replicas": scaler.min_replicas, "max_replicas": scaler.max_replicas}


def adopt_replicas(engine: EngineCore, decision: Decision, now: datetime) -> None:
    """All ranks (the decision is the leader's, shared): record the planned count and ask the scaler for the
    change a RUN decision wants, so every rank stops at the same step."""
    scaler = engine.scaler
    if scaler is None or decision.replicas is None:
        return
    if engine.job_stats.replicas_planned != decision.replicas and engine.is_leader:
        engine.event("replicas", kind="planned", replicas=decision.replicas, reason=decision.reason)
    engine.job_stats.update(replicas_planned=decision.replicas)
    current = scaler.replicas
    wanted = decision.replicas
    if decision.action != Action.RUN or wanted in (0, current):
        return  # a pause releases the replicas by itself; the guard's forced RUN keeps the count
    accepted = engine.guarded("scaler.request", scaler.request, wanted, decision.reason)
    engine.job_stats.count_action("rescale")
    if engine.is_leader:
        engine.event("rescale", replicas_from=current, replicas_to=wanted, accepted=bool(accepted),
                     reason=decision.reason, at=now.isoformat())
