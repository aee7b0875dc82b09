"""One real Prometheus (and Pushgateway) per test session, scraping greentrain every second.

Targets: a two-rank job endpoint (rank 1 aggregated through the multiprocess
dir), a node endpoint (no job), a fleet controller's endpoint, the recorded
dcgm-exporter sample, and the Pushgateway. A background 'training loop' advances the job counters while the
tests query Prometheus's HTTP API.
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.registry import CollectorRegistry

sys.path.insert(0, str(Path(__file__).parent))

from gt_promstack import (
    DCGM_UUIDS,
    Prometheus,
    Pushgateway,
    StaticText,
    TraceSignals,
)

from greentrain.clock import ReplayClock
from greentrain.errors import DeviceLostError
from greentrain.exporters import MetricsServer
from greentrain.fleet import FleetPlan, JobPlan
from greentrain.fleet.metrics import FleetCollector, FleetSnapshot, FleetStats, JobPlace, PartitionFigures
from greentrain.jobstats import JobState, JobStats
from greentrain.monitor import Monitor
from greentrain.testing import FakeCPUDomain, FakeGPU

from gt_stack import JOB, Stack  # noqa: E402  (shared with the test modules)
TEST_DATA = Path(__file__).resolve().parents[1] / "data"
REPLAY_ORIGIN = datetime(2022, 6, 1, 12, 30, tzinfo=UTC)

needs_prometheus = pytest.mark.skipif(
    not (shutil.which("prometheus") or Path("/usr/bin/prometheus").exists()), reason="prometheus not installed")


def _trainer(stop: threading.Event, stats: list[JobStats]) -> None:
    """Advance the counters as a training loop would: 10 steps/s, a refused cap each second, and in every
    12 s a 3 s pause (the state series then show real transitions)."""
    tick = 0
    while not stop.wait(0.1):
        tick += 1
        phase = tick % 120
        if phase == 90:
            stats[0].count_action("pause")
            for s in stats:
                s.update(state=JobState.PAUSED)
        elif phase == 0:
            stats[0].count_action("resume")
            for s in stats:
                s.update(state=JobState.RUNNING)
        if phase < 90:
            for s in stats:
                s.add(steps=1, tokens=512, energy_j=21.0, emissions_g=0.002, emissions_avoided_g=0.0008)
                s.update(last_step_energy_j=21.0, last_step_source="interpolated")  # 0.1 s steps
                s.add_expert_tokens([300, 212], imbalance=1.17)  # a 2-expert MoE's router statistics
        if tick % 10 == 0:
            stats[0].count_action("set_power_limit")
            stats[0].update(power_cap_refused_total=stats[0].power_cap_refused_total + 1)


_FLEET_PLAN = FleetPlan(now_h=0.0, planned_emissions_g=0.0, method="rolling", solve_s=0.4, jobs={
    j: JobPlan(job_id=j, option=0, next_start_h=0.0, finish_h=9.0, planned_emissions_g=0.0)
    for j in ("hopper", "steady")})


def _fleet_partitions(fleet: FleetStats, rounds: int) -> PartitionFigures:
    """Two partitions on two zones; a started job hops between them every 4 rounds (a migration each time)."""
    hopper = "gpu-fr" if rounds // 4 % 2 else "gpu-gb"
    jobs = [JobPlace(job_id="hopper", partition=hopper, gpus=8, power_kw=5.6, running=True, started=True),
            JobPlace(job_id="steady", partition="gpu-gb", gpus=16, power_kw=11.2, running=rounds % 3 > 0,
                     started=True)]
    return fleet.meter.round(rounds / 7200, zones={"gpu-gb": "GB", "gpu-fr": "FR"},
                             capacity={"gpu-gb": 32, "gpu-fr": 32}, jobs=jobs,
                             intensity_g_per_kwh={"gpu-gb": 180.0 + rounds % 5, "gpu-fr": 55.0},
                             plan=_FLEET_PLAN)


def _fleet_rounds(stop: threading.Event, fleet: FleetStats) -> None:
    """Publish a fleet controller's snapshot twice a second, as its rounds would (compressed)."""
    rounds = 0
    while not stop.wait(0.5):
        rounds += 1
        fleet.publish(FleetSnapshot(gpus_in_use=48 + rounds % 8, gpus_capacity=64,
                                    jobs={"running": 6, "pausing": rounds % 2, "paused": 3, "waiting": 11},
                                    emitted_g={"actual": 35.0 * rounds, "planned": 33.0 * rounds},
                                    planned_remaining_g=90_000.0 - 30.0 * rounds, deadlines_at_risk=rounds % 3,
                                    slurm_errors=rounds // 20, plan_cpu_s=0.4,
                                    partitions=_fleet_partitions(fleet, rounds)))


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, carbon_trace: Callable[[str], Path]) -> Iterator[Stack]:
    if not Path("/usr/bin/prometheus").exists() or not Path("/usr/bin/prometheus-pushgateway").exists():
        pytest.skip("prometheus / prometheus-pushgateway binaries not installed")
    tmp = tmp_path_factory.mktemp("promstack")
    clock = ReplayClock(REPLAY_ORIGIN)
    gpus = [FakeGPU("a40", index=0, uuid=DCGM_UUIDS[0]), FakeGPU("a40", index=1, uuid=DCGM_UUIDS[1]),
            FakeGPU("v100", index=2)]
    gpus[1].set_power_limit_w(200.0)
    gpus[2].fail(DeviceLostError("GPU 2: GPU_IS_LOST"))
    package = FakeCPUDomain("package-0", 65.0)
    now = datetime.now(UTC)
    stats0 = JobStats(job=JOB, state=JobState.RUNNING, precision="bf16", power_limit_w=250.0,
                      deadline=now + timedelta(hours=2), projected_finish=now + timedelta(hours=3),
                      settings_unrestored=1, budget_remaining_g=120.0, budget_projected_g=95.0,
                      # what advisory mode reports (the stack checks that every metric is scraped)
                      advised_power_limit_w=200.0, advised_sm_clock_mhz=1410, advised_precision="bf16",
                      advised_energy_change=-0.08, advised_time_change=0.03,
                      replicas_planned=4, replicas_actual=2)  # an elastic job mid-change (carbon scaling)
    stats1 = JobStats(job=JOB, state=JobState.RUNNING)
    signals = TraceSignals(carbon_trace("GB_2022_hourly.csv"), clock, stale=True, age_s=9000.0)
    rank_dir = tmp / "ranks"
    monitors = [Monitor([gpus[0], gpus[2]], [package], interval_s=0.2).start(),
                Monitor([gpus[1]], [package], interval_s=0.2).start(),
                Monitor([FakeGPU("rtx6000", index=0)], [], interval_s=0.2).start()]
    with pytest.MonkeyPatch.context() as env:  # two local ranks of one node, as torchrun numbers them
        env.setenv("LOCAL_RANK", "1")
        rank1 = MetricsServer(job=JOB, monitor=monitors[1], job_stats=stats1, multiprocess_dir=rank_dir).start()
        env.setenv("LOCAL_RANK", "0")
        job_server = MetricsServer(job=JOB, monitor=monitors[0], signals=signals,
                                   job_stats=stats0, clock=clock, multiprocess_dir=rank_dir).start()
    node_signals = TraceSignals(carbon_trace("US-CAL-CISO_2022_hourly.csv"), clock)
    node_server = MetricsServer(job="node", monitor=monitors[2],
                                signals=node_signals, clock=clock).start()
    fleet_stats = FleetStats()
    fleet_registry = CollectorRegistry()
    fleet_registry.register(FleetCollector(fleet_stats))
    fleet_server = MetricsServer(job="greentrain-fleet", registry=fleet_registry).start()
    dcgm = StaticText((TEST_DATA / "api-responses" / "dcgm-exporter_metrics_sample.prom").read_text())
    stop = threading.Event()
    trainer = threading.Thread(target=_trainer, args=(stop, [stats0, stats1]), daemon=True)
    trainer.start()
    fleet_rounds = threading.Thread(target=_fleet_rounds, args=(stop, fleet_stats), daemon=True)
    fleet_rounds.start()
    prometheus = pushgateway = None
    try:
        pushgateway = Pushgateway(tmp)
        prometheus = Prometheus(tmp, _scrape_configs(job_server.port, node_server.port, dcgm.port, pushgateway.port,
                                                     fleet_server.port))
        prometheus.wait_for("count(up == 1) == 5", timeout_s=30)
        yield Stack(prometheus, pushgateway, job_server, node_server, stats0, stats1, gpus, signals, clock,
                    fleet_server)
    finally:
        stop.set()
        trainer.join(timeout=5)
        fleet_rounds.join(timeout=5)
        for process in (prometheus, pushgateway):
            if process is not None:
                process.process.stop()
        dcgm.stop()
        for server in (rank1, job_server, node_server, fleet_server):
            server.stop()
        for monitor in monitors:
            monitor.stop()


def _scrape_configs(job_port: int, node_port: int, dcgm_port: int, pushgateway_port: int,
                    fleet_port: int) -> list[dict]:
    def static(port: int) -> list[dict]:
        return [{"targets": [f"127.0.0.1:{port}"]}]

    # honor_labels keeps the training job's own `job` label, as exporters/prometheus.yml recommends.
    return [
        {"job_name": "greentrain", "honor_labels": True, "static_configs": static(job_port)},
        {"job_name": "greentrain-node", "static_configs": static(node_port)},
        {"job_name": "dcgm-exporter", "static_configs": static(dcgm_port)},
        {"job_name": "pushgateway", "honor_labels": True, "static_configs": static(pushgateway_port)},
        {"job_name": "greentrain-fleet", "static_configs": static(fleet_port)},
    ]
