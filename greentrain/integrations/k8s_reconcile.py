"""The reconcile loop both Kubernetes controllers share: list the managed objects, let the policy decide each, patch it.

greentrain manages two kinds of object: batch Jobs (``kubernetes.py``: suspend
and resume) and Kubeflow PyTorchJobs (``pytorchjob.py``: the worker count).
Only three things differ between them, the hooks of ``Controller``: how a kind
lists its managed objects, names one, and reconciles one. Everything else lives
here once: the opt-in label and the annotations both read, their parsers, the
pass in which one bad object or API fault never stops the others, one forecast
fetch per zone and pass, the policy's snapshot, and the loop that repeats it.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from greentrain.clock import Clock
from greentrain.errors import ConfigError, GreentrainError, SignalError
from greentrain.jobstats import JobState
from greentrain.policies.base import Policy, Snapshot
from greentrain.signals.base import IntensityPoint

__all__ = [
    "ANNOTATION_PREFIX", "MANAGED_LABEL", "ZONE", "DEADLINE", "WORK_HOURS", "RESUME_OVERHEAD_S", "OBSERVED_AT",
    "DECISION", "DEFAULT_RESUME_OVERHEAD_S", "Controller", "Forecasts", "Outcome", "Reconciler",
    "annotation_number", "decision_note", "is_api_error", "parse_annotation_time", "run_controllers", "snapshot",
]

log = logging.getLogger(__name__)

ANNOTATION_PREFIX = "greentrain.io/"
"""Every greentrain label and annotation key starts with this."""
MANAGED_LABEL = ANNOTATION_PREFIX + "managed"
ZONE = ANNOTATION_PREFIX + "zone"
DEADLINE = ANNOTATION_PREFIX + "deadline"
WORK_HOURS = ANNOTATION_PREFIX + "work-hours"
RESUME_OVERHEAD_S = ANNOTATION_PREFIX + "resume-overhead-s"
OBSERVED_AT = ANNOTATION_PREFIX + "observed-at"
DECISION = ANNOTATION_PREFIX + "decision"

DEFAULT_RESUME_OVERHEAD_S = 300.0
"""Pods restart, reload the checkpoint and warm up: minutes, charged by the policy per resume."""

Forecasts = Callable[[str], Sequence[IntensityPoint]]
"""A zone's carbon intensity points (raises SignalError when the provider fails)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one reconcile pass did to one object."""

    namespace: str
    name: str
    suspend: bool | None
    """The suspension now wanted (None: the object was left alone)."""
    changed: bool
    reason: str

    @classmethod
    def left_alone(cls, namespace: str, name: str, reason: str) -> Outcome:
        """The object was not patched: it finished, or it could not be read or written."""
        return cls(namespace=namespace, name=name, suspend=None, changed=False, reason=reason)


def parse_annotation_time(text: str, what: str) -> datetime:
    """An annotation's ISO-8601 time with its zone; ConfigError naming ``what`` otherwise."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not ISO-8601 (e.g. 2026-11-22T06:00:00Z)") from None
    if parsed.tzinfo is None:
        raise ConfigError(f"{what}: {text!r} has no timezone; add 'Z'")
    return parsed


def annotation_number(notes: dict[str, str], key: str, where: str, default: float | None = None) -> float:
    """Annotation ``key`` as a number >= 0 (``default`` when absent); ConfigError naming ``where`` and ``key``."""
    text = notes.get(key)
    if text is None and default is not None:
        return float(default)
    if not text:
        raise ConfigError(f"{where}: annotation {key} is missing")
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: annotation {key}={text!r} is not a number") from None
    if value < 0:
        raise ConfigError(f"{where}: annotation {key} must be >= 0, got {value}")
    return value


def decision_note(head: str, reason: str) -> str:
    """The ``greentrain.io/decision`` annotation: what was decided and why, cut to fit kubectl's columns."""
    return f"{head}: {reason}"[:250]


def snapshot(points: Sequence[IntensityPoint], now: datetime, *, work_s: float, done_s: float, suspended: bool,
             deadline: datetime, resume_overhead_s: float) -> Snapshot:
    """What the policy sees of a managed object: remaining work, carbon now and ahead, deadline, state."""
    current = next((p for p in points if p.start <= now < p.end), None)
    state = (JobState.PAUSED if done_s > 0 else JobState.WAITING) if suspended else JobState.RUNNING
    return Snapshot(work_remaining_s=max(0.0, work_s - done_s), carbon_now=current,
                    forecast=tuple(p for p in points if p.end > now and p is not current), deadline=deadline,
                    resume_overhead_s=resume_overhead_s, state=state)


ApiT = TypeVar("ApiT")
"""The API client a controller calls (``k8s_objects.BatchApi``, ``CustomObjectsApi``)."""
ObjT = TypeVar("ObjT")
"""One managed object as that client lists it."""


class Controller(ABC, Generic[ApiT, ObjT]):
    """Reconciles one kind of managed object with the policy; subclasses say how to list, name and reconcile one."""

    KIND = "object"
    """How log lines name one object of this kind (``job``, ``pytorchjob``)."""

    def __init__(self, api: ApiT, policy: Policy, forecasts: Forecasts, *, clock: Clock,
                 namespace: str | None = None) -> None:
        self._api = api
        self._policy = policy
        self._forecasts = forecasts
        self._clock = clock
        self._namespace = namespace

    @abstractmethod
    def _list(self, selector: str) -> list[ObjT]:
        """The objects carrying label ``selector``, in ``self._namespace`` or every namespace."""

    @abstractmethod
    def _identify(self, obj: ObjT) -> tuple[str, str]:
        """(namespace, name) of one listed object."""

    @abstractmethod
    def _reconcile(self, obj: ObjT, now: datetime, points: Callable[[str], list[IntensityPoint]]) -> Outcome:
        """Decide one object and patch it; ``points(zone)`` is the zone's forecast for this pass."""

    def reconcile_once(self) -> list[Outcome]:
        """One pass over every managed object; one bad object, an API error on one or a carbon fault stops none."""
        now = self._clock.now()
        cache: dict[str, list[IntensityPoint]] = {}
        outcomes = []
        for obj in self._list(f"{MANAGED_LABEL}=true"):
            namespace, name = self._identify(obj)
            try:
                outcomes.append(self._reconcile(obj, now, lambda zone: self._points(zone, cache)))
            except ConfigError as e:
                log.warning("%s", e)
                outcomes.append(Outcome.left_alone(namespace, name, str(e)))
            except Exception as e:  # an API error on one object must not stop the others
                if not is_api_error(e):
                    raise
                log.warning("%s %s/%s: Kubernetes API error, retrying next pass: %s", self.KIND, namespace, name, e)
                outcomes.append(Outcome.left_alone(namespace, name, f"API error: {e}"))
        return outcomes

    def _points(self, zone: str, cache: dict[str, list[IntensityPoint]]) -> list[IntensityPoint]:
        if zone not in cache:
            try:
                cache[zone] = list(self._forecasts(zone))
            except SignalError as e:
                log.warning("zone %s: no carbon forecast (%s); the policy decides without it", zone, e)
                cache[zone] = []
        return cache[zone]

    def run(self, interval_s: float, stop: threading.Event) -> None:
        """Reconcile every ``interval_s`` (clock time) until ``stop`` is set."""
        run_controllers([self], self._clock, interval_s, stop)


class Reconciler(Protocol):
    """What ``run_controllers`` drives: a ``Controller`` (batch Jobs, PyTorchJobs) or anything with its pass."""

    def reconcile_once(self) -> list[Outcome]:
        """One pass over the objects it manages."""
        ...


def run_controllers(controllers: Sequence[Reconciler], clock: Clock, interval_s: float,
                    stop: threading.Event) -> None:
    """Reconcile every controller every ``interval_s`` until ``stop``; a failing pass is logged (with its
    traceback when it is not an API or connection fault) and retried at the next one, it never ends the loop."""
    while not stop.is_set():
        for controller in controllers:
            try:
                controller.reconcile_once()
            except Exception as e:  # the API server is down, a CRD is missing: say so and retry
                expected = is_api_error(e) or isinstance(e, OSError | GreentrainError)
                log.warning("%s pass failed, retrying: %s", type(controller).__name__, e, exc_info=not expected)
        if clock.sleep(interval_s, stop):
            return


def is_api_error(error: Exception) -> bool:
    """Whether ``error`` came from the Kubernetes API or its HTTP transport (retry next pass)."""
    try:
        from kubernetes.client.exceptions import ApiException
    except ImportError:  # pragma: no cover - the k8s extra is not installed
        return False
    import urllib3.exceptions

    return isinstance(error, ApiException | urllib3.exceptions.HTTPError)
