"""Kubernetes: suspend and resume batch Jobs by carbon policy (``spec.suspend``).

A Job opts in with the label ``greentrain.io/managed: "true"`` and says what it
needs in annotations: ``greentrain.io/zone``, ``greentrain.io/deadline``
(ISO-8601 with zone) and ``greentrain.io/work-hours`` (running time at full
speed). Create it with ``spec.suspend: true``; the controller lets it run when
the policy says RUN and suspends it (Kubernetes stops its pods, which checkpoint
on SIGTERM) on PAUSE or DELAY_START. It keeps its own bookkeeping on the Job:
``greentrain.io/ran-seconds`` (running time seen so far, so a resumed Job only
plans its remaining work) and ``greentrain.io/decision`` (why, for kubectl).

The controller takes the ``BatchV1Api`` (or anything with the same methods),
the policy, a forecast source and a clock: tests pass a fake API and a frozen
clock. A failing forecast or API call is logged and retried next pass; it never
stops the loop (``k8s_reconcile.py``, shared with the PyTorchJob controller).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from greentrain.errors import ConfigError
from greentrain.integrations.k8s_reconcile import (
    ANNOTATION_PREFIX,
    DEADLINE,
    DECISION,
    DEFAULT_RESUME_OVERHEAD_S,
    MANAGED_LABEL,
    OBSERVED_AT,
    RESUME_OVERHEAD_S,
    WORK_HOURS,
    ZONE,
    Controller,
    Outcome,
    annotation_number,
    decision_note,
    parse_annotation_time,
    snapshot,
)
from greentrain.integrations.k8s_objects import BatchApi, BatchJob, JobPatch
from greentrain.policies.base import Action, Decision
from greentrain.signals.base import IntensityPoint

__all__ = [
    "MANAGED_LABEL",
    "ZONE",
    "DEADLINE",
    "WORK_HOURS",
    "RESUME_OVERHEAD_S",
    "ANNOTATION_PREFIX",
    "parse_annotation_time",
    "RAN_SECONDS",
    "OBSERVED_AT",
    "DECISION",
    "ManagedJob",
    "Outcome",
    "JobController",
]

log = logging.getLogger(__name__)

RAN_SECONDS = ANNOTATION_PREFIX + "ran-seconds"


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagedJob:
    """What the controller reads from one Job object."""

    name: str
    namespace: str
    zone: str
    deadline: datetime
    work_s: float
    resume_overhead_s: float
    ran_s: float
    observed_at: datetime | None
    suspended: bool
    active_pods: int
    finished: bool

    @classmethod
    def from_job(cls, job: BatchJob) -> ManagedJob:
        """Parse a ``V1Job``; ConfigError names the Job and the annotation at fault."""
        meta, spec, status = job.metadata, job.spec, job.status
        where = f"job {meta.namespace}/{meta.name}"
        notes = dict(meta.annotations or {})
        conditions = (status.conditions or []) if status else []
        finished = any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions)
        for key in (ZONE, DEADLINE):
            if not notes.get(key):
                raise ConfigError(f"{where}: annotation {key} is missing")
        return cls(
            name=meta.name,
            namespace=meta.namespace,
            zone=notes[ZONE],
            deadline=parse_annotation_time(notes[DEADLINE], f"{where}: annotation {DEADLINE}"),
            work_s=annotation_number(notes, WORK_HOURS, where) * 3600.0,
            resume_overhead_s=annotation_number(notes, RESUME_OVERHEAD_S, where, DEFAULT_RESUME_OVERHEAD_S),
            ran_s=annotation_number(notes, RAN_SECONDS, where, 0.0),
            observed_at=parse_annotation_time(notes[OBSERVED_AT], OBSERVED_AT) if notes.get(OBSERVED_AT) else None,
            suspended=bool(spec.suspend),
            active_pods=int((status.active or 0) if status else 0),
            finished=finished,
        )


class JobController(Controller[BatchApi, BatchJob]):
    """Reconciles managed Jobs' ``spec.suspend`` with the policy's decision (``batch_api``: a ``BatchV1Api``)."""

    KIND = "job"

    def _list(self, selector: str) -> list[BatchJob]:
        if self._namespace:
            return list(self._api.list_namespaced_job(self._namespace, label_selector=selector).items)
        return list(self._api.list_job_for_all_namespaces(label_selector=selector).items)

    def _identify(self, obj: BatchJob) -> tuple[str, str]:
        return obj.metadata.namespace, obj.metadata.name

    def _reconcile(self, obj: BatchJob, now: datetime, points: Callable[[str], list[IntensityPoint]]) -> Outcome:
        managed = ManagedJob.from_job(obj)
        if managed.finished:
            return Outcome.left_alone(managed.namespace, managed.name, "finished")
        ran_s = managed.ran_s
        if not managed.suspended and managed.active_pods > 0 and managed.observed_at is not None:
            ran_s += max(0.0, (now - managed.observed_at).total_seconds())
        seen = snapshot(points(managed.zone), now, work_s=managed.work_s, done_s=ran_s, suspended=managed.suspended,
                        deadline=managed.deadline, resume_overhead_s=managed.resume_overhead_s)
        decision = self._policy.decide(seen, now)
        suspend = decision.action is not Action.RUN
        body: JobPatch = {
            "metadata": {"annotations": {
                RAN_SECONDS: f"{ran_s:.0f}",
                OBSERVED_AT: now.isoformat(),
                DECISION: _describe(decision),
            }},
        }
        changed = suspend != managed.suspended
        if changed:
            body["spec"] = {"suspend": suspend}
            log.info("job %s/%s: %s (%s)", managed.namespace, managed.name,
                     "suspend" if suspend else "resume", decision.reason)
        self._api.patch_namespaced_job(managed.name, managed.namespace, body)
        return Outcome(namespace=managed.namespace, name=managed.name, suspend=suspend, changed=changed,
                       reason=decision.reason)


def _describe(decision: Decision) -> str:
    until = f" until {decision.until.isoformat()}" if decision.until else ""
    return decision_note(f"{decision.action.value}{until}", decision.reason)
