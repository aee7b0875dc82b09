"""Carbon scaling of Kubeflow PyTorchJobs against a fake custom-objects API that plays the training operator."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest

from greentrain.clock import FrozenClock
from greentrain.integrations import kubernetes as k8s
from greentrain.integrations import pytorchjob as ptj
from greentrain.integrations.pytorchjob import PyTorchJobController
from greentrain.policies import load_policy
from greentrain.signals.base import IntensityPoint, Kind

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
# Near-linear: 4 workers do 3.9x the work of one for 4x the draw. Work: 4 h at 2 workers.
PROFILE = "replicas,throughput,power_w\n1,100,300\n2,198,600\n4,390,1200\n"


def hourly(values: list[float]) -> list[IntensityPoint]:
    return [IntensityPoint(start=T0 + i * HOUR, end=T0 + (i + 1) * HOUR, intensity_g_per_kwh=v, kind=Kind.FORECAST,
                           provider="test", zone="GB") for i, v in enumerate(values)]


def merge(target: dict, patch: dict) -> None:
    """JSON merge patch (RFC 7386), as the API server applies a dict body."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeCustomObjectsApi:
    """Stores PyTorchJob dicts; after a patch, the operator brings up as many workers as asked (unless the
    count is in ``unschedulable``: then the old pods keep running and the new ones stay pending)."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], dict] = {}
        self.patches: list[dict] = []
        self.unschedulable: set[int] = set()

    def add(self, name: str, *, workers: int = 2, suspend: bool = True, deadline_h: float = 12,
            notes: dict | None = None) -> None:
        annotations = {k8s.ZONE: "GB", k8s.DEADLINE: (T0 + deadline_h * HOUR).isoformat(), k8s.WORK_HOURS: "4",
                       ptj.SCALING_PROFILE: PROFILE, k8s.RESUME_OVERHEAD_S: "300", **(notes or {})}
        self.jobs[("ml", name)] = {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "ml", "labels": {k8s.MANAGED_LABEL: "true"},
                         "annotations": annotations},
            "spec": {"elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 4},
                     "runPolicy": {"suspend": suspend},
                     "pytorchReplicaSpecs": {"Worker": {"replicas": workers, "template": {}}}},
            "status": {"replicaStatuses": {"Worker": {"active": 0 if suspend else workers}}},
        }

    def list_namespaced_custom_object(self, group, version, namespace, plural, label_selector=""):
        assert (group, version, plural) == ("kubeflow.org", "v1", "pytorchjobs")
        key, value = label_selector.split("=")
        return {"items": [copy.deepcopy(j) for (ns, _), j in sorted(self.jobs.items())
                          if ns == namespace and j["metadata"]["labels"].get(key) == value]}

    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        self.patches.append(copy.deepcopy(body))
        job = self.jobs[(namespace, name)]
        before = job["status"]["replicaStatuses"]["Worker"]["active"]
        merge(job, body)
        wanted = job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
        if job["spec"]["runPolicy"]["suspend"]:
            active = 0
        elif wanted in self.unschedulable:
            active = min(before, wanted)
        else:
            active = wanted
        job["status"]["replicaStatuses"]["Worker"]["active"] = active
        return job

    def workers(self, name: str) -> tuple[int, bool, int]:
        job = self.jobs[("ml", name)]
        return (job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], job["spec"]["runPolicy"]["suspend"],
                job["status"]["replicaStatuses"]["Worker"]["active"])


def controller(api, values, clock):
    return PyTorchJobController(api, load_policy("carbon-aware"), lambda zone: hourly(values), clock=clock,
                                namespace="ml")


def test_clean_hours_scale_up_dirty_hours_pause_and_work_is_counted_at_the_first_count():
    api = FakeCustomObjectsApi()
    api.add("train", workers=2)
    clock = FrozenClock(T0)
    # Clean, then dirty for the rest of the day: 4 h of work at 2 workers fits in ~2 h at 4 workers.
    values = [50, 50, 50] + [600] * 21
    [outcome] = controller(api, values, clock).reconcile_once()
    assert outcome.changed and api.workers("train") == (4, False, 4)
    notes = api.jobs[("ml", "train")]["metadata"]["annotations"]
    assert notes[ptj.REFERENCE_REPLICAS] == "2" and notes[ptj.WORK_DONE_S] == "0"
    assert notes[k8s.DECISION].startswith("4 workers: carbon-aware")
    clock.advance(3600)
    controller(api, values, clock).reconcile_once()
    done = float(api.jobs[("ml", "train")]["metadata"]["annotations"][ptj.WORK_DONE_S])
    assert done == pytest.approx(3600 * 390 / 198, abs=1)  # an hour at 4 workers is 1.97 h of work at 2
    clock.advance(3 * 3600)  # the work is done by now, the rest of the day is dirty: nothing left to run
    [outcome] = controller(api, values, clock).reconcile_once()
    assert float(api.jobs[("ml", "train")]["metadata"]["annotations"][ptj.WORK_DONE_S]) >= 4 * 3600


def test_dirty_now_clean_later_keeps_the_job_suspended():
    api = FakeCustomObjectsApi()
    api.add("train", workers=2)
    [outcome] = controller(api, [600, 600, 50, 50, 50, 50], FrozenClock(T0)).reconcile_once()
    assert outcome.suspend is True and api.workers("train") == (2, True, 0)
    assert api.patches[-1]["spec"] == {"runPolicy": {"suspend": True}}


def test_a_count_whose_workers_never_come_up_is_reverted_and_never_planned_again():
    api = FakeCustomObjectsApi()
    api.add("train", workers=2, suspend=False)
    api.unschedulable = {4}
    clock = FrozenClock(T0)
    values = [50] + [600] * 23  # one clean hour: worth a restart at 4 workers now
    controller(api, values, clock).reconcile_once()
    assert api.workers("train") == (4, False, 2)  # asked for 4; only the 2 old workers run
    clock.advance(300)
    controller(api, values, clock).reconcile_once()
    assert api.workers("train")[0] == 4  # within the timeout: wait
    clock.advance(600)
    [outcome] = controller(api, values, clock).reconcile_once()
    assert outcome.changed and "4 workers never came up; back to 2" in outcome.reason
    assert api.workers("train") == (2, False, 2)
    assert api.jobs[("ml", "train")]["metadata"]["annotations"][ptj.FAILED_REPLICAS] == "4"
    clock.advance(300)
    controller(api, values, clock).reconcile_once()
    assert api.workers("train")[0] in (1, 2)  # 4 is out of the plan now


def test_bad_annotations_are_reported_and_the_job_left_alone():
    api = FakeCustomObjectsApi()
    api.add("bad", notes={ptj.SCALING_PROFILE: "replicas,throughput,power_w\n1,100,300\n2,-5,600\n"})
    api.add("odd", workers=3)
    outcomes = {o.name: o for o in controller(api, [50] * 24, FrozenClock(T0)).reconcile_once()}
    assert "row 3: throughput must be a finite number > 0" in outcomes["bad"].reason
    assert "3 workers (its work-hours count) is not a count" in outcomes["odd"].reason
    assert api.patches == []


def test_an_api_error_or_a_bad_bookkeeping_number_affects_only_its_job():
    from kubernetes.client.exceptions import ApiException

    class Conflicting(FakeCustomObjectsApi):
        def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body):
            if name == "conflict":
                raise ApiException(status=409, reason="Conflict")
            return super().patch_namespaced_custom_object(group, version, namespace, plural, name, body)

    api = Conflicting()
    api.add("conflict")
    api.add("garbled", notes={ptj.WORK_DONE_S: "lots"})
    api.add("fine")
    outcomes = {o.name: o for o in controller(api, [50] * 24, FrozenClock(T0)).reconcile_once()}
    assert outcomes["conflict"].reason.startswith("API error") and outcomes["conflict"].suspend is None
    assert "ml/garbled: annotation greentrain.io/work-done-s='lots' is not a number" in outcomes["garbled"].reason
    assert outcomes["fine"].suspend is False and api.workers("fine")[1] is False


def test_run_controllers_survives_a_failing_pass_and_stops():
    import threading

    from greentrain.integrations.pytorchjob import run_controllers

    stop = threading.Event()
    calls: list[str] = []

    class Flaky:
        def reconcile_once(self):
            calls.append("flaky")
            raise ConnectionError("API server unreachable")

    class Counting:
        def reconcile_once(self):
            calls.append("ok")
            if calls.count("ok") == 3:
                stop.set()

    clock = FrozenClock(T0)
    run_controllers([Flaky(), Counting()], clock, 300.0, stop)
    assert calls == ["flaky", "ok"] * 3 and clock.now() == T0 + timedelta(seconds=600)
