"""The Kubernetes Job controller against a fake BatchV1Api holding real ``V1Job`` objects."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from greentrain.clock import FrozenClock
from greentrain.errors import SignalError
from greentrain.integrations import kubernetes as k8s
from greentrain.integrations.kubernetes import JobController
from greentrain.policies import load_policy
from greentrain.signals.base import IntensityPoint, Kind

T0 = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def hourly(values: list[float], zone: str = "GB") -> list[IntensityPoint]:
    return [IntensityPoint(start=T0 + i * HOUR, end=T0 + (i + 1) * HOUR, intensity_g_per_kwh=v,
                           kind=Kind.FORECAST, provider="test", zone=zone) for i, v in enumerate(values)]


class FakeBatchApi:
    """Stores V1Jobs, applies merge patches like the API server, and plays the Job controller:
    an unsuspended Job gets a running pod, a suspended one loses it."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], client.V1Job] = {}
        self.patches: list[tuple[str, str, dict]] = []
        self.fail_patch_for: set[str] = set()

    def add(self, name: str, namespace: str = "ml", *, zone: str = "GB", deadline: datetime | None = None,
            work_hours: float = 2.0, extra: dict | None = None, suspend: bool = True) -> None:
        notes = {k8s.ZONE: zone, k8s.DEADLINE: (deadline or T0 + 12 * HOUR).isoformat(),
                 k8s.WORK_HOURS: str(work_hours), k8s.RESUME_OVERHEAD_S: "60", **(extra or {})}
        self.jobs[(namespace, name)] = client.V1Job(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels={k8s.MANAGED_LABEL: "true"},
                                         annotations=notes),
            spec=client.V1JobSpec(suspend=suspend, template=client.V1PodTemplateSpec()),
            status=client.V1JobStatus(active=0 if suspend else 1),
        )

    def _selected(self, label_selector: str, namespace: str | None = None) -> client.V1JobList:
        key, value = label_selector.split("=")
        items = [copy.deepcopy(j) for (ns, _), j in sorted(self.jobs.items())
                 if (namespace is None or ns == namespace) and (j.metadata.labels or {}).get(key) == value]
        return client.V1JobList(items=items)

    def list_namespaced_job(self, namespace: str, label_selector: str = "") -> client.V1JobList:
        return self._selected(label_selector, namespace)

    def list_job_for_all_namespaces(self, label_selector: str = "") -> client.V1JobList:
        return self._selected(label_selector)

    def patch_namespaced_job(self, name: str, namespace: str, body: dict) -> client.V1Job:
        if name in self.fail_patch_for:
            raise ApiException(status=409, reason="Conflict")
        self.patches.append((namespace, name, body))
        job = self.jobs[(namespace, name)]
        job.metadata.annotations.update(body.get("metadata", {}).get("annotations", {}))
        if "suspend" in body.get("spec", {}):
            job.spec.suspend = body["spec"]["suspend"]
            job.status.active = 0 if job.spec.suspend else 1
        return job

    def finish(self, name: str, namespace: str = "ml") -> None:
        job = self.jobs[(namespace, name)]
        job.status.active = 0
        job.status.conditions = [client.V1JobCondition(type="Complete", status="True")]

    def suspended(self, name: str, namespace: str = "ml") -> bool:
        return self.jobs[(namespace, name)].spec.suspend

    def note(self, name: str, key: str, namespace: str = "ml") -> str:
        return self.jobs[(namespace, name)].metadata.annotations[key]


# Dirty for 3 h, clean for 3 h, dirty after: a 2 h job due in 12 h belongs in hours 3-5.
DIRTY_CLEAN_DIRTY = [420.0] * 3 + [60.0] * 3 + [420.0] * 30


def controller(api: FakeBatchApi, clock: FrozenClock, values=DIRTY_CLEAN_DIRTY, **kwargs) -> JobController:
    points = {"GB": hourly(values, "GB"), "NO": hourly([20.0] * 36, "NO")}
    return JobController(api, load_policy("forecast-optimal"), lambda zone: points[zone], clock=clock, **kwargs)


@pytest.mark.timeout(60)
def test_job_waits_for_the_clean_hours_runs_through_them_and_is_left_alone_when_done() -> None:
    api, clock = FakeBatchApi(), FrozenClock(T0 + timedelta(minutes=5))
    api.add("train")
    ctl = controller(api, clock)
    ctl.reconcile_once()
    assert api.suspended("train")
    assert api.note("train", k8s.DECISION).startswith(("pause", "delay_start"))
    clock.advance(3 * 3600)  # 03:05, the clean spell
    outcome = ctl.reconcile_once()[0]
    assert outcome.changed and outcome.suspend is False and not api.suspended("train")
    clock.advance(3600)  # 04:05: an hour of running is booked, one hour left
    ctl.reconcile_once()
    assert not api.suspended("train")
    assert float(api.note("train", k8s.RAN_SECONDS)) == pytest.approx(3600, abs=1)
    api.finish("train")
    clock.advance(3600)
    assert ctl.reconcile_once()[0].reason == "finished"
    assert not api.suspended("train")


@pytest.mark.timeout(60)
def test_a_clean_grid_runs_at_once_and_a_tight_deadline_overrides_a_dirty_one() -> None:
    api, clock = FakeBatchApi(), FrozenClock(T0 + timedelta(minutes=5))
    api.add("clean", zone="NO")
    api.add("urgent", deadline=T0 + 2 * HOUR + timedelta(minutes=20), work_hours=2.0)
    outcomes = {o.name: o for o in controller(api, clock).reconcile_once()}
    assert outcomes["clean"].suspend is False
    assert outcomes["urgent"].suspend is False  # waiting would miss the deadline
    assert not api.suspended("clean") and not api.suspended("urgent")


@pytest.mark.timeout(60)
def test_running_job_is_suspended_when_the_grid_turns_dirty() -> None:
    api, clock = FakeBatchApi(), FrozenClock(T0 + 3 * HOUR + timedelta(minutes=5))
    # Started earlier by hand, 1 h of 6 done; the clean spell ends at 06:00, another comes at 12:00.
    api.add("train", suspend=False, work_hours=6.0, deadline=T0 + 20 * HOUR,
            extra={k8s.RAN_SECONDS: "3600", k8s.OBSERVED_AT: (T0 + 3 * HOUR).isoformat()})
    values = [420.0] * 3 + [60.0] * 3 + [420.0] * 6 + [60.0] * 6 + [420.0] * 20
    ctl = controller(api, clock, values)
    ctl.reconcile_once()
    assert not api.suspended("train")
    clock.advance(3 * 3600)  # 06:05, dirty again
    ctl.reconcile_once()
    assert api.suspended("train")
    ran_s = float(api.note("train", k8s.RAN_SECONDS))
    assert ran_s == pytest.approx(3600 + 3 * 3600 + 300, abs=1)  # booked up to the pass that suspended it
    clock.advance(6 * 3600)  # 12:05, clean again; the remaining work resumes
    ctl.reconcile_once()
    assert not api.suspended("train")
    assert float(api.note("train", k8s.RAN_SECONDS)) == pytest.approx(ran_s, abs=1)  # no time booked while suspended


@pytest.mark.timeout(60)
def test_bad_annotations_and_api_errors_affect_only_their_job() -> None:
    api, clock = FakeBatchApi(), FrozenClock(T0 + timedelta(minutes=5))
    api.add("broken", extra={k8s.WORK_HOURS: "two"})
    api.add("conflict", zone="NO")
    api.add("fine", zone="NO")
    api.fail_patch_for.add("conflict")
    outcomes = {o.name: o for o in controller(api, clock).reconcile_once()}
    assert "annotation greentrain.io/work-hours='two' is not a number" in outcomes["broken"].reason
    assert "ml/broken" in outcomes["broken"].reason
    assert outcomes["conflict"].reason.startswith("API error")
    assert outcomes["fine"].suspend is False and not api.suspended("fine")


@pytest.mark.timeout(60)
def test_a_failing_carbon_api_does_not_stop_the_controller() -> None:
    api, clock = FakeBatchApi(), FrozenClock(T0 + timedelta(minutes=5))
    api.add("train", namespace="team-a")
    api.add("other", namespace="team-b")

    def broken(zone: str):
        raise SignalError(f"{zone}: HTTP 503 from provider")

    ctl = JobController(api, load_policy("forecast-optimal"), broken, clock=clock, namespace="team-a")
    outcomes = ctl.reconcile_once()
    assert [o.name for o in outcomes] == ["train"]  # only its namespace
    assert outcomes[0].suspend is not None  # decided (without carbon data), not crashed
    assert "other" not in {name for _, name, _ in api.patches}


@pytest.mark.timeout(60)
def test_run_loop_reconciles_every_interval_until_stopped() -> None:
    api, clock = FakeBatchApi(), FrozenClock(T0 + timedelta(minutes=5))
    api.add("train")
    stop = threading.Event()
    ctl = controller(api, clock)
    passes = []
    original = ctl.reconcile_once

    def counting():
        passes.append(clock.now())
        if len(passes) == 4:
            stop.set()
        return original()

    ctl.reconcile_once = counting
    ctl.run(3600.0, stop)
    assert [p - passes[0] for p in passes] == [i * HOUR for i in range(4)]
    assert not api.suspended("train")  # pass 4 at 03:05 is in the clean spell


@pytest.mark.timeout(60)
def test_cli_once_runs_a_pass_with_a_replayed_trace(tmp_path, monkeypatch, capsys) -> None:
    from greentrain.cli import k8s as k8s_cli
    from greentrain.cli import main

    header = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
              "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
              "Data Estimated,Data Estimation Method")
    values = [20.0] * 2 + [300.0] * 46  # clean only for the next two hours: run now
    rows = [f"{(T0 + i * HOUR):%Y-%m-%d %H:%M:%S},X,GB,GB,{v},{v},0,0,t,false," for i, v in enumerate(values)]
    trace = tmp_path / "gb.csv"
    trace.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    api = FakeBatchApi()
    api.add("train", deadline=datetime.now(UTC) + 12 * HOUR)
    monkeypatch.setattr(k8s_cli, "_batch_api", lambda kubeconfig: api)
    with pytest.raises(SystemExit) as exited:
        main(["k8s-controller", "--once", "--namespace", "ml", "--replay-trace", str(trace),
              "--replay-start", "2026-11-21T00:00Z"])
        raise SystemExit(0)
    out = capsys.readouterr().out
    assert exited.value.code == 0
    assert "ml/train: running (changed)" in out
    assert not api.suspended("train")


@pytest.mark.timeout(60)
def test_cli_without_credentials_is_one_line_exit_2(tmp_path, capsys, monkeypatch) -> None:
    from greentrain.cli import main

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["k8s-controller", "--once", "--kubeconfig", str(tmp_path / "nope.yaml"), "--replay-trace",
              str(tmp_path / "x.csv"), "--replay-start", "2022-01-01T00:00Z"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err and err.count("\n") == 1
