"""The shipped manifests parse, grant no more than needed, and the Job example is one the controller accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from greentrain.integrations.kubernetes import ManagedJob

MANIFESTS = Path(__file__).resolve().parents[2] / "integrations" / "kubernetes"


def docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def as_model(doc: dict, model: str):
    """Deserialize like the client does for API answers, so field names and types are checked."""
    return client.ApiClient().deserialize(json.dumps(doc), model, "application/json")


@pytest.mark.timeout(30)
def test_example_job_is_suspended_and_its_annotations_are_valid() -> None:
    (job_doc,) = docs("job.yaml")
    job = as_model(job_doc, "V1Job")
    managed = ManagedJob.from_job(job)
    assert managed.suspended and managed.zone == "DE-LU" and managed.work_s == 6 * 3600
    assert managed.deadline.tzinfo is not None


@pytest.mark.timeout(30)
def test_controller_may_only_read_and_patch_jobs() -> None:
    kinds = {d["kind"]: d for d in docs("controller.yaml")}
    assert kinds["ClusterRole"]["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "list", "watch", "patch"]}]
    deployment = as_model(kinds["Deployment"], "V1Deployment")
    (container,) = deployment.spec.template.spec.containers
    assert container.args[:2] == ["greentrain", "k8s-controller"]
    assert container.security_context.run_as_non_root and container.security_context.read_only_root_filesystem
    assert container.security_context.capabilities.drop == ["ALL"]


@pytest.mark.timeout(30)
def test_node_agent_gets_only_what_each_container_needs() -> None:
    daemonset = as_model(next(d for d in docs("daemonset.yaml") if d["kind"] == "DaemonSet"), "V1DaemonSet")
    pod = daemonset.spec.template.spec
    assert not pod.host_network and not pod.host_pid and pod.automount_service_account_token is False
    containers = {c.name: c for c in pod.containers}
    exporter, daemon = containers["exporter"].security_context, containers["daemon"].security_context
    assert exporter.run_as_non_root and exporter.capabilities.drop == ["ALL"] and not exporter.capabilities.add
    assert not daemon.privileged and not daemon.allow_privilege_escalation
    assert daemon.capabilities.drop == ["ALL"] and daemon.capabilities.add == ["SYS_ADMIN"]
    assert containers["exporter"].args[:2] == ["greentrain", "exporter"]
    assert containers["daemon"].args[:2] == ["greentrain", "daemon"]


@pytest.mark.timeout(30)
def test_example_pytorchjob_is_suspended_and_scalable() -> None:
    from greentrain.integrations.pytorchjob import ScaledJob

    (doc,) = docs("pytorchjob.yaml")
    job = ScaledJob.from_object(doc)
    assert job.suspended and job.reference == 4 and job.work_s == 8 * 3600
    assert job.profile.replica_counts == (1, 2, 4, 8) and (job.min_replicas, job.max_replicas) == (1, 8)
