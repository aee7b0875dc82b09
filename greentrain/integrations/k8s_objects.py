"""The slices of Kubernetes objects and API clients that the controllers read and patch, as types.

The kubernetes client ships no type information and tests pass fakes, so the
controllers are typed against what they use: Protocols for the client's
batch ``V1Job`` objects (read by attribute) and ``BatchV1Api``, TypedDicts for
a Kubeflow PyTorchJob (the custom-objects API hands out plain dicts) and for
the patches sent back. Fields the API may send as null are ``| None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypedDict

__all__ = ["BatchApi", "BatchJob", "JobPatch", "CustomObjectsApi", "PyTorchJob", "PyTorchJobPatch"]


# --- batch/v1 Job, as the client's model objects ------------------------------------------------

class ObjectMeta(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def annotations(self) -> dict[str, str] | None: ...


class JobCondition(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def status(self) -> str: ...


class JobSpec(Protocol):
    @property
    def suspend(self) -> bool | None: ...


class BatchJobStatus(Protocol):
    @property
    def conditions(self) -> Sequence[JobCondition] | None: ...
    @property
    def active(self) -> int | None: ...


class BatchJob(Protocol):
    """A ``V1Job``."""

    @property
    def metadata(self) -> ObjectMeta: ...
    @property
    def spec(self) -> JobSpec: ...
    @property
    def status(self) -> BatchJobStatus | None: ...


class BatchJobList(Protocol):
    @property
    def items(self) -> Sequence[BatchJob]: ...


class AnnotationsPatch(TypedDict):
    annotations: dict[str, str]


class SuspendPatch(TypedDict):
    suspend: bool


class JobPatch(TypedDict, total=False):
    """A strategic-merge patch of a Job: greentrain's annotations, and ``spec.suspend`` when it changes."""

    metadata: AnnotationsPatch
    spec: SuspendPatch


class BatchApi(Protocol):
    """The three calls of ``BatchV1Api`` the Job controller makes."""

    def list_namespaced_job(self, namespace: str, *, label_selector: str) -> BatchJobList: ...
    def list_job_for_all_namespaces(self, *, label_selector: str) -> BatchJobList: ...
    def patch_namespaced_job(self, name: str, namespace: str, body: JobPatch) -> object: ...


# --- kubeflow.org/v1 PyTorchJob, as the custom-objects API's dicts ------------------------------

class Metadata(TypedDict, total=False):
    name: str
    namespace: str
    annotations: dict[str, str] | None


class ReplicaSpec(TypedDict, total=False):
    replicas: int


class ElasticPolicy(TypedDict, total=False):
    minReplicas: int
    maxReplicas: int | None


class RunPolicy(TypedDict, total=False):
    suspend: bool


class PyTorchJobSpec(TypedDict, total=False):
    pytorchReplicaSpecs: dict[str, ReplicaSpec] | None
    elasticPolicy: ElasticPolicy | None
    runPolicy: RunPolicy | None


class Condition(TypedDict, total=False):
    type: str
    status: str


class ReplicaStatus(TypedDict, total=False):
    active: int


class PyTorchJobStatus(TypedDict, total=False):
    conditions: list[Condition] | None
    replicaStatuses: dict[str, ReplicaStatus | None] | None


class PyTorchJob(TypedDict, total=False):
    metadata: Metadata
    spec: PyTorchJobSpec
    status: PyTorchJobStatus | None


class PyTorchJobList(TypedDict, total=False):
    items: list[PyTorchJob]


class PyTorchJobPatch(TypedDict, total=False):
    """A merge patch of a PyTorchJob: annotations, and the worker count or suspension."""

    metadata: AnnotationsPatch
    spec: PyTorchJobSpec


class CustomObjectsApi(Protocol):
    """The three calls of ``CustomObjectsApi`` the PyTorchJob controller makes."""

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, *,
                                      label_selector: str) -> PyTorchJobList: ...
    def list_cluster_custom_object(self, group: str, version: str, plural: str, *,
                                   label_selector: str) -> PyTorchJobList: ...
    def patch_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                       body: PyTorchJobPatch) -> object: ...
