"""Pushgateway round trip against a real Pushgateway (and the Prometheus scraping it)."""

from __future__ import annotations

import time

import pytest
from gt_stack import Stack
from gt_promstack import get_json, http_text

from greentrain.errors import ConfigError
from greentrain.exporters import MetricsServer, PushgatewayConfig
from greentrain.jobstats import JobState, JobStats

pytestmark = pytest.mark.timeout(60)


def _groups(stack: Stack) -> list[dict]:
    return get_json(stack.pushgateway.url + "/api/v1/metrics")["data"]


def _group_of(stack: Stack, job: str) -> dict | None:
    return next((g for g in _groups(stack) if g["labels"].get("job") == job), None)


def test_final_push_marks_the_job_finished_and_prometheus_sees_it(stack: Stack) -> None:
    stats = JobStats(job="batch-1", state=JobState.RUNNING)
    stats.add(steps=40, tokens=4096, energy_j=1234.5, emissions_g=0.25)
    config = PushgatewayConfig(url=stack.pushgateway.url, interval_s=60.0, instance="node-a")
    server = MetricsServer(job="batch-1", job_stats=stats, pushgateway=config).start()
    stats.add(steps=2)
    server.stop()
    group = _group_of(stack, "batch-1")
    assert group is not None and group["labels"] == {"job": "batch-1", "instance": "node-a"}
    text = http_text(stack.pushgateway.url + "/metrics")
    assert 'greentrain_training_steps_total{instance="node-a",job="batch-1"} 42' in text
    assert 'greentrain_job_energy_joules_total{instance="node-a",job="batch-1"} 1234.5' in text
    finished = stack.prometheus.wait_for('greentrain_job_finished_timestamp_seconds{job="batch-1"}', timeout_s=20)
    assert finished[0]["metric"]["instance"] == "node-a"
    steps = stack.prometheus.wait_for('greentrain_training_steps_total{job="batch-1",instance="node-a"}')
    assert float(steps[0]["value"][1]) == 42


def test_delete_on_exit_removes_the_group(stack: Stack) -> None:
    stats = JobStats(job="batch-2", state=JobState.RUNNING)
    config = PushgatewayConfig(url=stack.pushgateway.url, interval_s=0.2, delete_on_exit=True, instance="node-b")
    server = MetricsServer(job="batch-2", job_stats=stats, pushgateway=config).start()
    pusher = server.pusher
    assert pusher is not None
    for _ in range(100):  # pushed on schedule while running (bounded wait: 5 s)
        if pusher.pushes_ok:
            break
        stats.add(steps=1)
        time.sleep(0.05)
    assert _group_of(stack, "batch-2") is not None
    server.stop()
    assert _group_of(stack, "batch-2") is None


def test_unreachable_pushgateway_never_raises_into_training() -> None:
    stats = JobStats(job="batch-3")
    config = PushgatewayConfig(url="http://127.0.0.1:9/", interval_s=60.0, timeout_s=0.5)
    server = MetricsServer(job="batch-3", job_stats=stats, pushgateway=config).start()
    server.stop()  # final push fails: logged, not raised
    assert server.pusher is not None and server.pusher.pushes_failed == 1


def test_pushgateway_url_is_validated_and_credentials_never_echoed() -> None:
    with pytest.raises(ConfigError, match="--pushgateway") as info:
        PushgatewayConfig(url="ftp://user:s3cret@host/")
    assert "s3cret" not in str(info.value)
    assert PushgatewayConfig(url="http://u:s3cret@gw:9091").safe_url() == "http://gw:9091"
