"""The running Prometheus stack the exporter tests share (imported by conftest and the tests)."""

from __future__ import annotations

from dataclasses import dataclass

from gt_promstack import Prometheus, Pushgateway, TraceSignals

from greentrain.clock import ReplayClock
from greentrain.exporters import MetricsServer
from greentrain.jobstats import JobStats
from greentrain.testing import FakeGPU

JOB = "llm-test"


@dataclass
class Stack:
    prometheus: Prometheus
    pushgateway: Pushgateway
    job_server: MetricsServer
    node_server: MetricsServer
    stats0: JobStats
    stats1: JobStats
    gpus: list[FakeGPU]
    signals: TraceSignals
    clock: ReplayClock
    fleet_server: MetricsServer | None = None

    @property
    def job_instance(self) -> str:
        return f"127.0.0.1:{self.job_server.port}"
