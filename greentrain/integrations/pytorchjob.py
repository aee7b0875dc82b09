"""Kubernetes carbon scaling: a Kubeflow ``PyTorchJob`` with an elastic policy gets its worker count per hour.

A PyTorchJob opts in with the label ``greentrain.io/managed: "true"`` and the
annotations of a managed Job (``greentrain.io/zone``, ``greentrain.io/deadline``,
``greentrain.io/work-hours``: running time at the ``Worker.replicas`` it was
created with) plus ``greentrain.io/scaling-profile`` (the CSV
``replicas,throughput,power_w`` text). Each reconcile pass asks the policy
(``carbon-aware``: the same ``decide()`` the engine and the simulator run) for
the count, within the elastic policy's ``minReplicas``..``maxReplicas``, and
patches ``spec.pytorchReplicaSpecs.Worker.replicas`` (0: ``runPolicy.suspend``).
The training operator then restarts the workers under torchrun's elastic
rendezvous; greentrain's runtime checkpoints on the SIGTERM and reshards on
the relaunch.

Bookkeeping lives in annotations: the work done so far, counted at the
original count (``greentrain.io/work-done-s``), when it was observed, the
count before the last change, and counts whose workers never came up (a
change that is not running ``greentrain.io/rescale-timeout-s`` later, 600 s by
default, is reverted to the previous count and never planned again).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from greentrain.errors import ConfigError
from greentrain.integrations import k8s_reconcile as k8s
from greentrain.integrations.k8s_reconcile import (
    Controller,
    Outcome,
    Reconciler,
    annotation_number,
    decision_note,
    parse_annotation_time,
    run_controllers,
    snapshot,
)
from greentrain.integrations.k8s_objects import CustomObjectsApi, PyTorchJob, PyTorchJobPatch
from greentrain.policies.base import Action, Snapshot
from greentrain.policies.scaling_profile import ScalingProfile, parse_scaling_profile
from greentrain.signals.base import IntensityPoint

__all__ = ["GROUP", "VERSION", "PLURAL", "SCALING_PROFILE", "WORK_DONE_S", "FAILED_REPLICAS",
           "PyTorchJobController", "Reconciler", "ScaledJob", "run_controllers"]

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
SCALING_PROFILE = k8s.ANNOTATION_PREFIX + "scaling-profile"
REFERENCE_REPLICAS = k8s.ANNOTATION_PREFIX + "reference-replicas"
WORK_DONE_S = k8s.ANNOTATION_PREFIX + "work-done-s"
PREVIOUS_REPLICAS = k8s.ANNOTATION_PREFIX + "previous-replicas"
CHANGED_AT = k8s.ANNOTATION_PREFIX + "changed-at"
FAILED_REPLICAS = k8s.ANNOTATION_PREFIX + "failed-replicas"
RESCALE_TIMEOUT_S = k8s.ANNOTATION_PREFIX + "rescale-timeout-s"
_DEFAULT_RESCALE_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaledJob:
    """What the controller reads from one PyTorchJob (a dict, as the custom-objects API returns it)."""

    name: str
    namespace: str
    zone: str
    deadline: datetime
    work_s: float
    reference: int
    replicas: int
    active: int
    suspended: bool
    finished: bool
    profile: ScalingProfile
    min_replicas: int
    max_replicas: int | None
    notes: dict[str, str]
    where: str

    @classmethod
    def from_object(cls, obj: PyTorchJob) -> ScaledJob:
        """Parse a PyTorchJob; ConfigError names the job and the field or annotation at fault."""
        meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status") or {}
        where = f"pytorchjob {meta.get('namespace')}/{meta.get('name')}"
        notes = dict(meta.get("annotations") or {})
        worker = (spec.get("pytorchReplicaSpecs") or {}).get("Worker")
        elastic = spec.get("elasticPolicy")
        if worker is None or elastic is None:
            raise ConfigError(f"{where}: needs spec.pytorchReplicaSpecs.Worker and spec.elasticPolicy for scaling")
        for key in (k8s.ZONE, k8s.DEADLINE, k8s.WORK_HOURS, SCALING_PROFILE):
            if not notes.get(key):
                raise ConfigError(f"{where}: annotation {key} is missing")
        profile = parse_scaling_profile(notes[SCALING_PROFILE], f"{where} annotation {SCALING_PROFILE}")
        replicas = int(worker.get("replicas", 1))
        reference = int(annotation_number(notes, REFERENCE_REPLICAS, where, default=replicas))
        if reference not in profile.replica_counts:
            raise ConfigError(f"{where}: {reference} workers (its work-hours count) is not a count in annotation "
                              f"{SCALING_PROFILE} (valid: {', '.join(map(str, profile.replica_counts))})")
        conditions = status.get("conditions") or []
        finished = any(c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions)
        return cls(
            name=meta["name"], namespace=meta["namespace"], zone=notes[k8s.ZONE],
            deadline=parse_annotation_time(notes[k8s.DEADLINE], f"{where}: annotation {k8s.DEADLINE}"),
            work_s=annotation_number(notes, k8s.WORK_HOURS, where) * 3600.0,
            reference=reference,
            replicas=replicas, active=int(((status.get("replicaStatuses") or {}).get("Worker") or {}).get("active", 0)),
            suspended=bool((spec.get("runPolicy") or {}).get("suspend", False)), finished=finished, profile=profile,
            min_replicas=int(elastic.get("minReplicas", 1)), max_replicas=elastic.get("maxReplicas"), notes=notes,
            where=where)

    def number(self, key: str, default: float) -> float:
        """Annotation ``key`` as a number >= 0, ``default`` when absent."""
        return annotation_number(self.notes, key, self.where, default)


class PyTorchJobController(Controller[CustomObjectsApi, PyTorchJob]):
    """Reconciles managed elastic PyTorchJobs' worker count with the policy's replica decision
    (``custom_api``: a ``CustomObjectsApi``)."""

    KIND = "pytorchjob"

    def _list(self, selector: str) -> list[PyTorchJob]:
        if self._namespace:
            found = self._api.list_namespaced_custom_object(GROUP, VERSION, self._namespace, PLURAL,
                                                            label_selector=selector)
        else:
            found = self._api.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector=selector)
        return list(found.get("items", []))

    def _identify(self, obj: PyTorchJob) -> tuple[str, str]:
        meta = obj.get("metadata", {})
        return meta.get("namespace", ""), meta.get("name", "")

    def _reconcile(self, obj: PyTorchJob, now: datetime,
                   points: Callable[[str], list[IntensityPoint]]) -> Outcome:
        job = ScaledJob.from_object(obj)
        if job.finished:
            return Outcome.left_alone(job.namespace, job.name, "finished")
        notes = job.notes
        failed = {int(r) for r in notes.get(FAILED_REPLICAS, "").split(",") if r.strip().isdigit()}
        running = not job.suspended and job.active > 0
        done_s = job.number(WORK_DONE_S, 0.0)
        workers = min(job.active, job.replicas)  # pods of a change still coming up do no work yet
        if running and notes.get(k8s.OBSERVED_AT) and workers in job.profile.replica_counts:
            observed = parse_annotation_time(notes[k8s.OBSERVED_AT], k8s.OBSERVED_AT)
            elapsed_s = max(0.0, (now - observed).total_seconds())
            done_s += elapsed_s * job.profile.speed(workers, job.reference)  # work counted at the first count
        annotations = {WORK_DONE_S: f"{done_s:.0f}", k8s.OBSERVED_AT: now.isoformat()}
        reverted = self._stuck_change(job, now)
        if reverted is not None:
            failed.add(job.replicas)
            why = f"{job.replicas} workers never came up; back to {reverted}"
            annotations.update({FAILED_REPLICAS: ",".join(map(str, sorted(failed))), PREVIOUS_REPLICAS: "",
                                k8s.DECISION: why})
            self._patch(job, reverted, annotations)
            return Outcome(namespace=job.namespace, name=job.name, suspend=False, changed=True, reason=why)
        decision = self._policy.decide(self._snapshot(job, done_s, failed, now, points(job.zone)), now)
        wanted = 0 if decision.action is not Action.RUN else (decision.replicas or job.replicas)
        current = 0 if job.suspended else job.replicas
        annotations[k8s.DECISION] = decision_note(f"{wanted} workers", decision.reason)
        if wanted != current:
            annotations.update({PREVIOUS_REPLICAS: str(current), CHANGED_AT: now.isoformat()})
            log.info("pytorchjob %s/%s: %d -> %d workers (%s)", job.namespace, job.name, current, wanted,
                     decision.reason)
        self._patch(job, wanted, annotations)
        return Outcome(namespace=job.namespace, name=job.name, suspend=wanted == 0, changed=wanted != current,
                       reason=decision.reason)

    def _stuck_change(self, job: ScaledJob, now: datetime) -> int | None:
        """The count to go back to when the last change has not come up within the timeout, else None."""
        previous = job.notes.get(PREVIOUS_REPLICAS, "")
        if job.suspended or not previous.isdigit() or int(previous) == 0 or job.active >= job.replicas:
            return None
        changed = job.notes.get(CHANGED_AT)
        timeout_s = job.number(RESCALE_TIMEOUT_S, _DEFAULT_RESCALE_TIMEOUT_S)
        if changed is None or (now - parse_annotation_time(changed, CHANGED_AT)).total_seconds() < timeout_s:
            return None
        return int(previous)

    def _snapshot(self, job: ScaledJob, done_s: float, failed: set[int], now: datetime,
                  points: list[IntensityPoint]) -> Snapshot:
        kept = tuple(p for p in job.profile.points if p.replicas not in failed or p.replicas == job.reference)
        base = snapshot(points, now, work_s=job.work_s, done_s=done_s, suspended=job.suspended,
                        deadline=job.deadline,
                        resume_overhead_s=job.number(k8s.RESUME_OVERHEAD_S, k8s.DEFAULT_RESUME_OVERHEAD_S))
        return dataclasses.replace(base, scaling=ScalingProfile(kept, job.profile.origin),
                                   replicas=0 if job.suspended else job.replicas, work_replicas=job.reference,
                                   min_replicas=job.min_replicas, max_replicas=job.max_replicas)

    def _patch(self, job: ScaledJob, workers: int, annotations: dict[str, str]) -> None:
        notes = {REFERENCE_REPLICAS: str(job.reference), **annotations}
        body: PyTorchJobPatch = {"metadata": {"annotations": notes}}
        if workers == 0:
            body["spec"] = {"runPolicy": {"suspend": True}}
        else:
            body["spec"] = {"runPolicy": {"suspend": False},
                            "pytorchReplicaSpecs": {"Worker": {"replicas": workers}}}
        self._api.patch_namespaced_custom_object(GROUP, VERSION, job.namespace, PLURAL, job.name, body)
