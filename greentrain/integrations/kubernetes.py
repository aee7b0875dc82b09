"""Kubernetes: suspend and resume batch Jobs by carbon policy (``spec.suspend``).

A Job opts in with the label ``greentrain.io/managed: "true"`` and says what it
needs in annotations: ``greentrain.io/zone``, ``greentrain.io/deadline``
(ISO-8601 with zone) and ``greentrain.io/work-hours`` (running time at full
speed). Create it with ``spec.suspend: true``; the controller lets it run when
the policy says RUN and suspends it (Kubernetes stops its pods, which checkpoint
on SIGTERM) on PAUSE or DELAY_START. It keeps its own bookkeeping on the Job:
``greentrain.io/ran-seconds`` (running time seen so far, so a resumed Job only
plans its remaining work) and ``greentrain.io/decision`` (why, for kubectl).

The controller takes the ``BatchV1Api`` (or anything with the same two methods),
the policy, a forecast source and a clock: tests pass a fake API and a frozen
clock. A failing forecast or API call is logged and retried next pass; it never
stops the loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from greentrain.clock import Clock
from greentrain.errors import ConfigError, GreentrainError, SignalError
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, Policy, Snapshot
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

ANNOTATION_PREFIX = "greentrain.io/"
"""Every greentrain label and annotation key starts with this."""
MANAGED_LABEL = ANNOTATION_PREFIX + "managed"
ZONE = ANNOTATION_PREFIX + "zone"
DEADLINE = ANNOTATION_PREFIX + "deadline"
WORK_HOURS = ANNOTATION_PREFIX + "work-hours"
RESUME_OVERHEAD_S = ANNOTATION_PREFIX + "resume-overhead-s"
RAN_SECONDS = ANNOTATION_PREFIX + "ran-seconds"
OBSERVED_AT = ANNOTATION_PREFIX + "observed-at"
DECISION = ANNOTATION_PREFIX + "decision"

_DEFAULT_RESUME_OVERHEAD_S = 300.0
"""Pods restart, reload the checkpoint and warm up: minutes, charged by the policy per resume."""


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
    def from_job(cls, job: Any) -> ManagedJob:
        """Parse a ``V1Job``; ConfigError names the Job and the annotation at fault."""
        meta, spec, status = job.metadata, job.spec, job.status
        where = f"job {meta.namespace}/{meta.name}"
        notes = dict(meta.annotations or {})
        conditions = (status.conditions or []) if status else []
        finished = any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions)

        def need(key: str) -> str:
            value = notes.get(key)
            if not value:
                raise ConfigError(f"{where}: annotation {key} is missing")
            return value

        def number(key: str, default: float | None = None) -> float:
            text = notes.get(key)
            if text is None and default is not None:
                return default
            try:
                value = float(need(key))
            except ValueError:
                raise ConfigError(f"{where}: annotation {key}={notes[key]!r} is not a number") from None
            if value < 0:
                raise ConfigError(f"{where}: annotation {key} must be >= 0, got {value}")
            return value

        return cls(
            name=meta.name,
            namespace=meta.namespace,
            zone=need(ZONE),
            deadline=parse_annotation_time(need(DEADLINE), f"{where}: annotation {DEADLINE}"),
            work_s=number(WORK_HOURS) * 3600.0,
            resume_overhead_s=number(RESUME_OVERHEAD_S, _DEFAULT_RESUME_OVERHEAD_S),
            ran_s=number(RAN_SECONDS, 0.0),
            observed_at=parse_annotation_time(notes[OBSERVED_AT], OBSERVED_AT) if notes.get(OBSERVED_AT) else None,
            suspended=bool(spec.suspend),
            active_pods=int((status.active or 0) if status else 0),
            finished=finished,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one reconcile pass did to one Job."""

    namespace: str
    name: str
    suspend: bool | None
    """The ``spec.suspend`` now wanted (None: Job left alone)."""
    changed: bool
    reason: str


def parse_annotation_time(text: str, what: str) -> datetime:
    """An annotation's ISO-8601 time with its zone; ConfigError naming ``what`` otherwise."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not ISO-8601 (e.g. 2026-11-22T06:00:00Z)") from None
    if parsed.tzinfo is None:
        raise ConfigError(f"{what}: {text!r} has no timezone; add 'Z'")
    return parsed


class JobController:
    """Reconciles managed Jobs' ``spec.suspend`` with the policy's decision."""

    def __init__(
        self,
        batch_api: Any,
        policy: Policy,
        forecasts: Callable[[str], Sequence[IntensityPoint]],
        *,
        clock: Clock,
        namespace: str | None = None,
    ) -> None:
        self._api = batch_api
        self._policy = policy
        self._forecasts = forecasts
        self._clock = clock
        self._namespace = namespace

    def _list_jobs(self) -> list[Any]:
        selector = f"{MANAGED_LABEL}=true"
        if self._namespace:
            return list(self._api.list_namespaced_job(self._namespace, label_selector=selector).items)
        return list(self._api.list_job_for_all_namespaces(label_selector=selector).items)

    def reconcile_once(self) -> list[Outcome]:
        """One pass over every managed Job; never raises for one bad Job or a carbon API fault."""
        now = self._clock.now()
        cache: dict[str, list[IntensityPoint]] = {}
        outcomes = []
        for job in self._list_jobs():
            try:
                outcomes.append(self._reconcile(job, now, cache))
            except ConfigError as e:
                log.warning("%s", e)
                outcomes.append(Outcome(namespace=job.metadata.namespace, name=job.metadata.name,
                                        suspend=None, changed=False, reason=str(e)))
            except Exception as e:  # an API error on one Job must not stop the others
                if not _is_api_error(e):
                    raise
                log.warning("job %s/%s: Kubernetes API error, retrying next pass: %s",
                            job.metadata.namespace, job.metadata.name, e)
                outcomes.append(Outcome(namespace=job.metadata.namespace, name=job.metadata.name,
                                        suspend=None, changed=False, reason=f"API error: {e}"))
        return outcomes

    def _points(self, zone: str, cache: dict[str, list[IntensityPoint]]) -> list[IntensityPoint]:
        if zone not in cache:
            try:
                cache[zone] = list(self._forecasts(zone))
            except SignalError as e:
                log.warning("zone %s: no carbon forecast (%s); the policy decides without it", zone, e)
                cache[zone] = []
        return cache[zone]

    def _reconcile(self, job: Any, now: datetime, cache: dict[str, list[IntensityPoint]]) -> Outcome:
        managed = ManagedJob.from_job(job)
        if managed.finished:
            return Outcome(namespace=managed.namespace, name=managed.name, suspend=None, changed=False,
                           reason="finished")
        ran_s = managed.ran_s
        if not managed.suspended and managed.active_pods > 0 and managed.observed_at is not None:
            ran_s += max(0.0, (now - managed.observed_at).total_seconds())
        decision = self._policy.decide(self._snapshot(managed, ran_s, now, self._points(managed.zone, cache)), now)
        suspend = decision.action is not Action.RUN
        body = {
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

    def _snapshot(self, job: ManagedJob, ran_s: float, now: datetime, points: list[IntensityPoint]) -> Snapshot:
        current = next((p for p in points if p.start <= now < p.end), None)
        if job.suspended:
            state = JobState.PAUSED if ran_s > 0 else JobState.WAITING
        else:
            state = JobState.RUNNING
        return Snapshot(
            work_remaining_s=max(0.0, job.work_s - ran_s),
            carbon_now=current,
            forecast=tuple(p for p in points if p.end > now and p is not current),
            deadline=job.deadline,
            resume_overhead_s=job.resume_overhead_s,
            state=state,
        )

    def run(self, interval_s: float, stop: threading.Event) -> None:
        """Reconcile every ``interval_s`` (clock time) until ``stop`` is set."""
        while not stop.is_set():
            try:
                self.reconcile_once()
            except GreentrainError as e:
                log.warning("reconcile pass failed: %s", e)
            except Exception as e:
                if not _is_api_error(e):
                    raise
                log.warning("listing Jobs failed, retrying: %s", e)
            if self._clock.sleep(interval_s, stop):
                return


def _describe(decision: Decision) -> str:
    until = f" until {decision.until.isoformat()}" if decision.until else ""
    return f"{decision.action.value}{until}: {decision.reason}"[:250]


def _is_api_error(error: Exception) -> bool:
    try:
        from kubernetes.client.exceptions import ApiException
    except ImportError:  # pragma: no cover - the k8s extra is not installed
        return False
    import urllib3.exceptions

    return isinstance(error, ApiException | urllib3.exceptions.HTTPError)
