"""The fleet's per-partition series (issue 39): set from a plan and the jobs' places, read back from a registry."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client.registry import CollectorRegistry

from greentrain.exporters import names as n
from greentrain.fleet import FleetPlan, JobStatus, Partition, PlannerConfig, RunOption, plan_fleet
from greentrain.fleet.metrics import FleetCollector, FleetSnapshot, FleetStats, JobPlace, PartitionFigures, PartitionMeter

pytestmark = pytest.mark.timeout(60)

ZONES = {"dirty": "D", "clean": "C"}
CAPACITY = {"dirty": 4, "clean": 8}
NOW_G = {"dirty": 300.0, "clean": 200.0}


def _registry(stats: FleetStats) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(FleetCollector(stats))
    return registry


def _two_partition_plan() -> tuple[list[JobStatus], FleetPlan]:
    """A paused job held on the dirty partition that the plan moves to the clean one, and a job running there."""
    both = (RunOption(4, 1.0, 4.0, partition="dirty"), RunOption(4, 1.0, 4.0, partition="clean"))
    long = JobStatus(job_id="long", options=both, remaining_h=5.0, deadline_h=20.0, partition="dirty",
                     started=True, migration_overhead_h=0.5)
    busy = JobStatus(job_id="busy", options=(RunOption(2, 1.0, 2.0),), remaining_h=3.0, deadline_h=3.0,
                     partition="clean", running=0, started=True)
    partitions = {name: Partition(name, CAPACITY[name], zone) for name, zone in ZONES.items()}
    plan = plan_fleet([long, busy], now_h=0.0, partitions=partitions, resume_overhead_h=0.1,
                      intensity={"D": np.full(24, 300.0), "C": np.full(24, 200.0)},
                      config=PlannerConfig(exact_max_binaries=0))
    return [long, busy], plan


def test_two_partitions_planned_running_capacity_migrations_and_emissions_by_zone() -> None:
    statuses, plan = _two_partition_plan()
    assert plan.jobs["long"].option == 1 and plan.jobs["busy"].option == 0  # long moves to the clean grid
    stats = FleetStats()
    registry = _registry(stats)

    def round_at(now_h: float, long_at: str, long_runs: bool) -> None:
        jobs = [JobPlace(job_id="long", partition=long_at, gpus=4, power_kw=4.0, running=long_runs, started=True),
                JobPlace(job_id="busy", partition="clean", gpus=2, power_kw=2.0, running=True, started=True)]
        figures = stats.meter.round(now_h, zones=ZONES, capacity=CAPACITY, intensity_g_per_kwh=NOW_G, jobs=jobs,
                                    plan=plan, statuses=statuses)
        stats.publish(FleetSnapshot(partitions=figures))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    gpus = n.FLEET_PARTITION_GPUS.name
    round_at(0.0, "dirty", False)  # the plan says: long runs on clean now; it is still paused on dirty
    assert value(gpus, partition="clean", zone="C", state="planned") == 6.0
    assert value(gpus, partition="dirty", zone="D", state="planned") == 0.0
    assert value(gpus, partition="clean", zone="C", state="running") == 2.0
    assert value(gpus, partition="dirty", zone="D", state="running") == 0.0
    assert value(gpus, partition="clean", zone="C", state="capacity") == 8.0
    assert value(gpus, partition="dirty", zone="D", state="capacity") == 4.0
    intensity = n.FLEET_PARTITION_INTENSITY.name
    assert value(intensity, partition="dirty", zone="D") == 300.0
    assert value(intensity, partition="clean", zone="C") == 200.0
    moves = n.FLEET_MIGRATIONS.name
    assert value(moves, from_partition="dirty", to_partition="clean") == 0.0  # exported before the first move
    assert value(moves, from_partition="clean", to_partition="dirty") == 0.0

    round_at(0.5, "clean", True)  # it resumed on the clean partition: one migration
    assert value(moves, from_partition="dirty", to_partition="clean") == 1.0
    assert value(moves, from_partition="clean", to_partition="dirty") == 0.0
    assert value(gpus, partition="clean", zone="C", state="running") == 6.0
    emitted = n.FLEET_ZONE_EMISSIONS.name
    assert value(emitted, zone="C") == pytest.approx(2.0 * 200.0 * 0.5)  # busy alone ran until now
    assert value(emitted, zone="D") == 0.0

    round_at(1.5, "clean", True)  # a job staying put is no migration; the hour ran at both jobs' draw
    assert value(moves, from_partition="dirty", to_partition="clean") == 1.0
    assert value(emitted, zone="C") == pytest.approx(200.0 + 6.0 * 200.0)
    assert value(emitted, zone="D") == 0.0


def test_a_single_partition_fleet_has_one_partition_and_one_zone() -> None:
    stats = FleetStats()
    registry = _registry(stats)
    meter = PartitionMeter()
    jobs = [JobPlace(job_id="1", partition="default", gpus=8, power_kw=5.6, running=True, started=True)]
    for now_h in (0.0, 2.0):
        stats.publish(FleetSnapshot(partitions=meter.round(now_h, zones={"default": "GB"}, capacity={"default": 16},
                                                           intensity_g_per_kwh={"default": 150.0}, jobs=jobs)))
    text = {(s.name, tuple(sorted(s.labels.items())), s.value) for m in registry.collect() for s in m.samples}
    partitions = {dict(labels).get("partition") for name, labels, _ in text if name == n.FLEET_PARTITION_GPUS.name}
    assert partitions == {"default"}
    assert not [s for s in text if s[0] == n.FLEET_MIGRATIONS.name]  # no other partition to move to
    assert registry.get_sample_value(n.FLEET_ZONE_EMISSIONS.name, {"zone": "GB"}) == pytest.approx(5.6 * 150 * 2)
    # No plan this round: nothing planned, the rest as observed.
    assert registry.get_sample_value(n.FLEET_PARTITION_GPUS.name,
                                     {"partition": "default", "zone": "GB", "state": "planned"}) == 0.0
    assert registry.get_sample_value(n.FLEET_PARTITION_GPUS.name,
                                     {"partition": "default", "zone": "GB", "state": "running"}) == 8.0


def test_a_job_never_started_moves_for_free_and_a_finished_one_is_forgotten() -> None:
    meter = PartitionMeter()

    def round_at(now_h: float, *jobs: JobPlace) -> PartitionFigures:
        return meter.round(now_h, zones=ZONES, capacity=CAPACITY, intensity_g_per_kwh=NOW_G, jobs=jobs)

    fresh = JobPlace(job_id="new", partition="dirty", gpus=1, power_kw=0.7, running=False, started=False)
    round_at(0.0, fresh)
    figures = round_at(1.0, JobPlace(job_id="new", partition="clean", gpus=1, power_kw=0.7, running=True,
                                     started=False))
    assert set(figures.migrations.values()) == {0}
    round_at(2.0)  # it finished
    figures = round_at(3.0, JobPlace(job_id="new", partition="dirty", gpus=1, power_kw=0.7, running=False,
                                     started=True))  # a new job under a reused id
    assert set(figures.migrations.values()) == {0}
    assert figures.emitted_g_by_zone == {"C": pytest.approx(0.7 * 200.0), "D": 0.0}


def test_planned_gpus_without_statuses_count_where_the_job_is() -> None:
    statuses, plan = _two_partition_plan()
    jobs = [JobPlace(job_id="long", partition="dirty", gpus=4, power_kw=4.0, running=False, started=True),
            JobPlace(job_id="busy", partition="clean", gpus=2, power_kw=2.0, running=True, started=True)]
    figures = PartitionMeter().round(0.0, zones=ZONES, capacity=CAPACITY, intensity_g_per_kwh=NOW_G, jobs=jobs,
                                     plan=plan)
    assert {p: f.planned_gpus for p, f in figures.partitions.items()} == {"dirty": 4, "clean": 2}
