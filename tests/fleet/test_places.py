"""Where as well as when: partitions on several grids in the one fleet plan (issue 39)."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from gt_fleet import feed, job

from greentrain.fleet import JobStatus, Partition, PlannerConfig, RunOption, offline_bound, plan_fleet
from greentrain.fleet.policies import CarbonAware, GreenestNow, RunNowFIFO
from greentrain.fleet.simulate import Cluster, SimResult, simulate_fleet

ROLLING = PlannerConfig(exact_max_binaries=0)


def _two_grids(home_later_g: float, migration_h: float):
    """A 6-hour job at a home grid that turns dirty after 2 h, beside a clean grid busy for those 2 h."""
    home = feed([100.0] * 2 + [home_later_g] * 30, zone="H")
    green = feed([50.0] * 32, zone="G")
    zones = {"H": home, "G": green}
    cluster = Cluster.of([Partition("home", 4, "H"), Partition("green", 4, "G")], 5 / 60, migration_h)
    jobs = [replace(job("g", gpus=4, work_h=2, deadline_h=2), partition="green", places=("green",)),
            replace(job("a", gpus=4, work_h=6, deadline_h=7.4), partition="home")]
    return simulate_fleet(jobs, home, CarbonAware(home, 8, zones=zones), cluster, zones=zones)


@pytest.mark.timeout(120)
def test_a_job_moves_to_the_clean_grid_when_the_move_pays() -> None:
    result = _two_grids(600.0, 0.25)
    a = next(r for r in result.runs if r.job.id == "a")
    assert a.segment_partitions == ["home", "green"] and a.migrations == 1 and a.resumes == 0
    assert a.segments[1][0] == pytest.approx(2.0) and a.finished_h == pytest.approx(6.25)  # 15 min without progress
    assert a.emissions_g == pytest.approx(4 * (2 * 100.0 + 4.25 * 50.0))
    assert result.late == [] and not result.capacity_exceeded


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("home_later_g", "migration_h"), [(52.0, 0.25), (600.0, 1.0)])
def test_a_job_stays_when_the_move_does_not_pay_or_would_risk_its_deadline(home_later_g: float,
                                                                           migration_h: float) -> None:
    # 4 h at 52 g/kWh costs less than 4.25 h at 50; an hour's migration leaves too little slack before the
    # deadline once the plan's margin is kept.
    result = _two_grids(home_later_g, migration_h)
    a = next(r for r in result.runs if r.job.id == "a")
    assert a.segment_partitions == ["home"] and a.migrations == 0
    assert result.late == []


def test_the_plan_pays_the_migration_of_a_paused_job_only_where_it_gains() -> None:
    """One plan: a paused job held on a dirty partition goes to the clean one, a 1-hour job whose migration
    (30 min) costs more than the difference stays."""
    partitions = {"dirty": Partition("dirty", 4, "D"), "clean": Partition("clean", 4, "C")}
    options = (RunOption(4, 1.0, 4.0, partition="dirty"), RunOption(4, 1.0, 4.0, partition="clean"))
    long = JobStatus(job_id="long", options=options, remaining_h=5.0, deadline_h=20.0, partition="dirty",
                     started=True, migration_overhead_h=0.5)
    plan = plan_fleet([long], now_h=0.0, partitions=partitions, resume_overhead_h=0.1, config=ROLLING,
                      intensity={"D": np.full(24, 300.0), "C": np.full(24, 200.0)})
    assert plan.jobs["long"].option == 1  # 5.5 h at 200 < 5.1 h at 300
    short = replace(long, job_id="short", remaining_h=1.0)
    plan = plan_fleet([short], now_h=0.0, partitions=partitions, resume_overhead_h=0.1, config=ROLLING,
                      intensity={"D": np.full(24, 230.0), "C": np.full(24, 200.0)})
    assert plan.jobs["short"].option == 0  # 1.1 h at 230 = 253 < 1.5 h at 200 = 300


def _instance(seed: int):
    rng = random.Random(3000 + seed)
    hours = 40
    zones = {}
    for zone, mean in (("A", 350.0), ("B", 200.0), ("C", 60.0)):
        phase = rng.random() * 6
        values = mean + 0.4 * mean * np.sin(np.arange(hours) / 24 * 2 * np.pi + phase) + rng.random() * 20
        zones[zone] = feed(list(values), zone=zone)
    parts = [Partition("a", rng.choice((6, 8)), "A"), Partition("b", rng.choice((4, 6)), "B"),
             Partition("c", rng.choice((2, 4)), "C")]
    jobs = []
    for i in range(rng.randint(6, 9)):
        home = rng.choice(("a", "a", "b"))
        pinned = rng.random() < 0.25
        work_h = round(rng.uniform(0.5, 5.0), 2)
        j = job(f"j{i}", gpus=rng.choice((1, 2, 2, 4)), work_h=work_h, deadline_h=work_h + rng.uniform(6, 16),
                submit_h=rng.choice((0.0, 0.0, 1.5, 3.2, 6.0)))
        jobs.append(replace(j, partition=home, places=(home,) if pinned else ()))
    jobs.sort(key=lambda j: j.submit)
    return zones, Cluster.of(parts, 5 / 60, 0.25), jobs


def _gpus_in_use(result: SimResult, name: str, at_h: float) -> int:
    return sum(int(gpus) for r in result.runs
               for (start, end, gpus), where in zip(r.segments, r.segment_partitions, strict=True)
               if where == name and start <= at_h < end)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", range(4))
def test_capacity_of_each_partition_places_and_the_bound_hold_on_random_instances(seed: int) -> None:
    zones, cluster, jobs = _instance(seed)
    first = zones["A"]
    policies = [RunNowFIFO(), GreenestNow(zones), CarbonAware(first, 0, zones=zones, config=ROLLING),
                CarbonAware(first, 0, zones=zones, config=ROLLING, home_only=True)]
    results = [simulate_fleet(jobs, first, p, cluster, zones=zones) for p in policies]
    parts = cluster.parts("A")
    bound = offline_bound(jobs, first.hour_of, first.actual, cluster.capacity_gpus, partitions=parts,
                          zones={z: f.actual for z, f in zones.items()})
    for policy, result in zip(policies, results, strict=True):
        assert not result.capacity_exceeded, policy.name
        starts = sorted({s for r in result.runs for s, _, _ in r.segments})
        for name, part in parts.items():  # checked from the schedule itself, not only the simulator's flag
            assert all(_gpus_in_use(result, name, t + 1e-9) <= part.capacity_gpus for t in starts), policy.name
        for r in result.runs:
            allowed = r.job.places or tuple(parts)
            assert set(r.segment_partitions) <= set(allowed), (policy.name, r.job.id)
            if r.job.places == (r.job.partition,):  # pinned: never anywhere but home
                assert set(r.segment_partitions) == {r.job.partition} and r.migrations == 0
        if policy.name in ("run-now", "time-only"):  # at home only
            assert all(set(r.segment_partitions) <= {r.job.partition} for r in result.runs), policy.name
        # The bound is a lower bound on the emissions of every schedule.
        assert bound.deadlines_relaxed or bound.emissions_g <= result.emissions_g * (1 + 1e-6) + 1e-6, policy.name
    plan, time_only = results[2], results[3]
    assert plan.late == [] or bound.deadlines_relaxed
    assert plan.emissions_g <= results[0].emissions_g * 1.02  # the plan beats FIFO at home (or ties)
    assert plan.emissions_g <= time_only.emissions_g * 1.05  # where as well as when: not worse than when alone


def test_the_jobs_file_gives_each_job_a_home_and_its_places() -> None:
    from greentrain.fleet import parse_jobs

    text = ("id,submit,gpus,work_hours,deadline_hours,partition,places\n"
            "free,2022-03-07T00:00Z,4,2,10,,\n"
            "pinned,2022-03-07T00:00Z,4,2,10,b,b\n"
            "away,2022-03-07T00:00Z,8,2,10,b,c; a\n")
    jobs = {j.id: j for j in parse_jobs(text, "jobs.csv", partitions={"a": 8, "b": 4, "c": 16},
                                        power_kw_per_gpu=0.5)}
    capacity = {"a": 8, "b": 4, "c": 16}
    assert jobs["free"].partition == "a" and jobs["free"].places == ()
    assert [o.partition for o in jobs["free"].placed_options(capacity)] == ["a", "b", "c"]
    assert [o.partition for o in jobs["pinned"].placed_options(capacity)] == ["b"]
    # Home b is not one of its places (and too small): it runs at its places only, in their order.
    assert [o.partition for o in jobs["away"].placed_options(capacity)] == ["c", "a"]
    assert [o.partition for o in jobs["free"].placed_options(capacity, home_only=True)] == ["a"]


@pytest.mark.parametrize("later_g", [290.0, 100.0])
def test_a_stretched_plan_still_pays_the_restart_of_a_job_it_pauses(later_g: float) -> None:
    """Stretched plans price restarts only in the first hours (``restarts_ahead_h``); pausing a running
    job now still costs its whole restart, so it pauses for a far cleaner hour only, not a slightly
    cleaner one."""
    partitions = {"a": Partition("a", 4, "A"), "b": Partition("b", 4, "B")}
    options = (RunOption(4, 1.0, 4.0, partition="a"), RunOption(4, 1.0, 4.0, partition="b"))
    running = JobStatus(job_id="r", options=options, remaining_h=3.0, deadline_h=40.0, partition="a",
                        running=0, started=True, migration_overhead_h=1.0)
    config = replace(ROLLING, stretch_places_above_jobs=0, restarts_ahead_h=0.0)
    intensity = {"A": np.r_[300.0, np.full(47, later_g)], "B": np.full(48, 400.0)}
    plan = plan_fleet([running], now_h=0.0, partitions=partitions, resume_overhead_h=0.5, config=config,
                      intensity=intensity)
    assert plan.jobs["r"].option == (0 if later_g == 290.0 else None)
