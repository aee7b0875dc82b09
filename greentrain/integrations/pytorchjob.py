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

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from greentrain.clock import Clock
from greentrain.errors import ConfigError, SignalError
from greentrain.integrations.kubernetes import (
    ANNOTATION_PREFIX,
    DEADLINE,
    DECISION,
    MANAGED_LABEL,
    OBSERVED_AT,
    RESUME_OVERHEAD_S,
    WORK_HOURS,
    ZONE,
    Outcome,
    parse_annotation_time,
)
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Policy, Snapshot
from greentrain.policies.scaling_profile import ScalingProfile, parse_scaling_profile
from greentrain.signals.base import IntensityPoint

__all__ = ["GROUP", "VERSION", "PLURAL", "SCALING_PROFILE", "WORK_DONE_S", "FAILED_REPLICAS",
           "PyTorchJobController", "Reconciler", "ScaledJob", "run_controllers"]

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
SCALING_PROFILE = ANNOTATION_PREFIX + "scaling-profile"
REFERENCE_REPLICAS = ANNOTATION_PREFIX + "reference-replicas"
WORK_DONE_S = ANNOTATION_PREFIX + "work-done-s"
PREVIOUS_REPLICAS = ANNOTATION_PREFIX + "previous-replicas"
CHANGED_AT = ANNOTATION_PREFIX + "changed-at"
FAILED_REPLICAS = ANNOTATION_PREFIX + "failed-replicas"
RESCALE_TIMEOUT_S = ANNOTATION_PREFIX + "rescale-timeout-s"


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

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> ScaledJob:
        meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status") or {}
        where = f"pytorchjob {meta.get('namespace')}/{meta.get('name')}"
        notes = dict(meta.get("annotations") or {})
        worker = (spec.get("pytorchReplicaSpecs") or {}).get("Worker")
        elastic = spec.get("elasticPolicy")
        if worker is None or elastic is None:
            raise ConfigError(f"{where}: needs spec.pytorchReplicaSpecs.Worker and spec.elasticPolicy for scaling")
        for key in (ZONE, DEADLINE, WORK_HOURS, SCALING_PROFILE):
            if not notes.get(key):
                raise ConfigError(f"{where}: annotation {key} is missing")
        profile = parse_scaling_profile(notes[SCALING_PROFILE], f"{where} annotation {SCALING_PROFILE}")
        replicas = int(worker.get("replicas", 1))
        reference = int(_number(notes, REFERENCE_REPLICAS, where, default=replicas))
        if reference not in profile.replica_counts:
            raise ConfigError(f"{where}: {reference} workers (its work-hours count) is not a count in annotation "
                              f"{SCALING_PROFILE} (valid: {', '.join(map(str, profile.replica_counts))})")
        conditions = status.get("conditions") or []
        finished = any(c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions)
        return cls(
            name=meta["name"], namespace=meta["namespace"], zone=notes[ZONE],
            deadline=parse_annotation_time(notes[DEADLINE], f"{where}: annotation {DEADLINE}"),
            work_s=_number(notes, WORK_HOURS, where) * 3600.0,
            reference=reference,
            replicas=replicas, active=int(((status.get("replicaStatuses") or {}).get("Worker") or {}).get("active", 0)),
            suspended=bool((spec.get("runPolicy") or {}).get("suspend", False)), finished=finished, profile=profile,
            min_replicas=int(elastic.get("minReplicas", 1)), max_replicas=elastic.get("maxReplicas"), notes=notes)


def _number(notes: dict[str, str], key: str, where: str, default: float | None = None) -> float:
    text = notes.get(key)
    if text is None and default is not None:
        return float(default)
    try:
        value = float(text or "")
    except ValueError:
        raise ConfigError(f"{where}: annotation {key}={text!r} is not a number") from None
    if value < 0:
        raise ConfigError(f"{where}: annotation {key} must be >= 0, got {value}")
    return value


class PyTorchJobController:
    """Reconciles managed elastic PyTorchJobs' worker count with the policy's replica decision."""

    def __init__(self, custom_api: Any, policy: Policy, forecasts: Callable[[str], Sequence[IntensityPoint]], *,
                 clock: Clock, namespace: str | None = None) -> None:
        self._api = custom_api
        self._policy = policy
        self._forecasts = forecasts
        self._clock = clock
        self._namespace = namespace

    def _list(self) -> list[dict[str, Any]]:
        selector = f"{MANAGED_LABEL}=true"
        if self._namespace:
            found = self._api.list_namespaced_custom_object(GROUP, VERSION, self._namespace, PLURAL,
                                                            label_selector=selector)
        else:
            found = self._api.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector=selector)
        return list(found.get("items", []))

    def reconcile_once(self) -> list[Outcome]:
        """One pass over every managed PyTorchJob; one bad job or a carbon API fault never stops the others."""
        now = self._clock.now()
        outcomes = []
        for obj in self._list():
            meta = obj.get("metadata", {})
            try:
                outcomes.append(self._reconcile(ScaledJob.from_object(obj), now))
            except ConfigError as e:
                log.warning("%s", e)
                outcomes.append(Outcome(namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                                        suspend=None, changed=False, reason=str(e)))
        return outcomes

    def _reconcile(self, job: ScaledJob, now: datetime) -> Outcome:
        if job.finished:
            return Outcome(namespace=job.namespace, name=job.name, suspend=None, changed=False, reason="finished")
        notes = job.notes
        failed = {int(r) for r in notes.get(FAILED_REPLICAS, "").split(",") if r.strip().isdigit()}
        running = not job.suspended and job.active > 0
        done_s = float(notes.get(WORK_DONE_S, "0") or 0)
        workers = min(job.active, job.replicas)  # pods of a change still coming up do no work yet
        if running and notes.get(OBSERVED_AT) and workers in job.profile.replica_counts:
            elapsed_s = max(0.0, (now - parse_annotation_time(notes[OBSERVED_AT], OBSERVED_AT)).total_seconds())
            done_s += elapsed_s * job.profile.speed(workers, job.reference)  # work counted at the first count
        annotations = {WORK_DONE_S: f"{done_s:.0f}", OBSERVED_AT: now.isoformat()}
        reverted = self._stuck_change(job, now, failed)
        if reverted is not None:
            failed.add(job.replicas)
            annotations.update({FAILED_REPLICAS: ",".join(map(str, sorted(failed))), PREVIOUS_REPLICAS: "",
                                DECISION: f"{job.replicas} workers never came up; back to {reverted}"})
            self._patch(job, reverted, annotations)
            return Outcome(namespace=job.namespace, name=job.name, suspend=False, changed=True,
                           reason=f"{job.replicas} workers never came up; back to {reverted}")
        decision = self._policy.decide(self._snapshot(job, done_s, failed, now), now)
        wanted = 0 if decision.action is not Action.RUN else (decision.replicas or job.replicas)
        current = 0 if job.suspended else job.replicas
        annotations[DECISION] = f"{wanted} workers: {decision.reason}"[:250]
        if wanted != current:
            annotations.update({PREVIOUS_REPLICAS: str(current), CHANGED_AT: now.isoformat()})
            log.info("pytorchjob %s/%s: %d -> %d workers (%s)", job.namespace, job.name, current, wanted,
                     decision.reason)
        self._patch(job, wanted, annotations)
        return Outcome(namespace=job.namespace, name=job.name, suspend=wanted == 0, changed=wanted != current,
                       reason=decision.reason)

    def _stuck_change(self, job: ScaledJob, now: datetime, failed: set[int]) -> int | None:
        """The count to go back to when the last change has not come up within the timeout, else None."""
        previous = job.notes.get(PREVIOUS_REPLICAS, "")
        if job.suspended or not previous.isdigit() or int(previous) == 0 or job.active >= job.replicas:
            return None
        changed = job.notes.get(CHANGED_AT)
        timeout_s = float(job.notes.get(RESCALE_TIMEOUT_S, "600") or 600)
        if changed is None or (now - parse_annotation_time(changed, CHANGED_AT)).total_seconds() < timeout_s:
            return None
        return int(previous)

    def _snapshot(self, job: ScaledJob, done_s: float, failed: set[int], now: datetime) -> Snapshot:
        try:
            points = list(self._forecasts(job.zone))
        except SignalError as e:
            log.warning("zone %s: no carbon forecast (%s); the policy decides without it", job.zone, e)
            points = []
        current = next((p for p in points if p.start <= now < p.end), None)
        kept = tuple(p for p in job.profile.points if p.replicas not in failed or p.replicas == job.reference)
        state = (JobState.PAUSED if done_s > 0 else JobState.WAITING) if job.suspended else JobState.RUNNING
        return Snapshot(
            work_remaining_s=max(0.0, job.work_s - done_s), carbon_now=current,
            forecast=tuple(p for p in points if p.end > now and p is not current), deadline=job.deadline,
            resume_overhead_s=float(job.notes.get(RESUME_OVERHEAD_S, "300") or 300), state=state,
            scaling=ScalingProfile(kept, job.profile.origin), replicas=0 if job.suspended else job.replicas,
            work_replicas=job.reference, min_replicas=job.min_replicas, max_replicas=job.max_replicas)

    def _patch(self, job: ScaledJob, workers: int, annotations: dict[str, str]) -> None:
        notes = {REFERENCE_REPLICAS: str(job.reference), **annotations}
        body: dict[str, Any] = {"metadata": {"annotations": notes}}
        if workers == 0:
            body["spec"] = {"runPolicy": {"suspend": True}}
        else:
            body["spec"] = {"runPolicy": {"suspend": False},
                            "pytorchReplicaSpecs": {"Worker": {"replicas": workers}}}
        self._api.patch_namespaced_custom_object(GROUP, VERSION, job.namespace, PLURAL, job.name, body)


class Reconciler(Protocol):
    """A controller ``run_controllers`` drives: the batch-Job one (``kubernetes.py``) or ``PyTorchJobController``."""

    def reconcile_once(self) -> list[Outcome]:
        """One pass over the objects it manages."""
        ...


def run_controllers(controllers: Sequence[Reconciler], clock: Clock, interval_s: float,
                    stop: threading.Event) -> None:
    """Reconcile every controller (batch Jobs, PyTorchJobs) every ``interval_s`` until ``stop``; a failing pass
    is logged and retried at the next one, it never ends the loop."""
    while not stop.is_set():
        for controller in controllers:
            try:
                controller.reconcile_once()
            except Exception as e:  # the API server is down, a CRD is missing: say so and retry
                log.warning("%s pass failed, retrying: %s", type(controller).__name__, e)
        if clock.sleep(interval_s, stop):
            return
