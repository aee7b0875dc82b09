"""The deadline guard: the rolling plan never acts so that a deadline a whole-GPU schedule meets is lost."""

from __future__ import annotations

from dataclasses import replace

import pytest
from gt_fleet import feed, job

from greentrain.fleet import JobStatus, PlannerConfig, RunOption
from greentrain.fleet.deadline_check import edf_misses, keep_deadlines
from greentrain.fleet.policies import CarbonAware, RunNowFIFO
from greentrain.fleet.simulate import Cluster, simulate_fleet

ROLLING = PlannerConfig(exact_max_binaries=0)


def _status(job_id: str, gpus: int, remaining_h: float, deadline_h: float) -> JobStatus:
    return JobStatus(job_id=job_id, options=(RunOption(gpus, 1.0, float(gpus)),), remaining_h=remaining_h,
                     deadline_h=deadline_h)


@pytest.mark.parametrize("deadline_h", [10.0, 12.0])
def test_the_guard_starts_now_only_what_the_deadlines_need(deadline_h: float) -> None:
    # 4 GPUs: a whole-cluster job of 4 h and a 1-GPU job of 6 h cannot overlap, so they need 10 h in a row.
    # Waiting an hour loses the 10-hour deadline; the 12-hour one has room to wait.
    jobs = [_status("a", 4, 4.0, deadline_h), _status("b", 1, 6.0, deadline_h)]
    waits = edf_misses(jobs, {}, now_h=0.0, until_h=1.0, free_now=4, capacity=4, resume_overhead_h=0.1)
    kept = keep_deadlines(jobs, {}, now_h=0.0, free_now=4, capacity=4, resume_overhead_h=0.1)
    if deadline_h == 10.0:
        assert waits == 1
        assert len(kept) == 1 and edf_misses(jobs, kept, now_h=0.0, until_h=1.0, free_now=4, capacity=4,
                                             resume_overhead_h=0.1) == 0
    else:
        assert waits == 0 and kept == {}


def test_the_guard_counts_restart_overheads() -> None:
    # A paused job (started before) pays the resume overhead: 6 h of work + 0.5 h restart in 6.4 h is late.
    paused = JobStatus(job_id="p", options=(RunOption(1, 1.0, 1.0),), remaining_h=6.0, deadline_h=6.4, started=True)
    assert edf_misses([paused], {"p": 0}, now_h=0.0, until_h=1.0, free_now=1, capacity=1, resume_overhead_h=0.5) == 1
    assert edf_misses([paused], {"p": 0}, now_h=0.0, until_h=1.0, free_now=1, capacity=1, resume_overhead_h=0.3) == 0


def test_the_guard_keeps_a_pinned_job_before_jobs_that_may_run_elsewhere() -> None:
    # 8 GPUs. A 6-GPU job that can run only here (1 h of slack) and four 1-GPU jobs the plan brought here
    # that may also run on other partitions. Pausing the wide job for them loses its deadline; keeping it
    # makes two of them late here, where they need not be: elsewhere has room.
    wide = JobStatus(job_id="wide", options=(RunOption(6, 1.0, 6.0),), remaining_h=4.0, deadline_h=5.0,
                     running=0, started=True)
    small = [_status(f"s{i}", 1, 6.0, 8.0) for i in range(4)]
    chosen = {s.job_id: 0 for s in small}
    args = {"now_h": 0.0, "free_now": 8, "capacity": 8, "resume_overhead_h": 0.1}
    # Seen as one partition where every job counts the same, one late job beats two.
    assert "wide" not in keep_deadlines([wide, *small], chosen, **args)
    kept = keep_deadlines([wide, *small], chosen, **args, movable=frozenset(chosen))
    assert kept.get("wide") == 0
    assert edf_misses([wide, *small], kept, until_h=1.0, **args, movable=frozenset(chosen)) < 5  # no pinned miss


@pytest.mark.timeout(120)
def test_carbon_aware_is_on_time_where_fifo_is_on_time_at_tight_capacity() -> None:
    # Hand-made: three 1-GPU jobs and a whole-cluster job on 4 GPUs, dirty and clean hours alternating.
    # Without the guard the rolling plan (GPU-hours later on) defers j3 and runs the 4-GPU job in a clean
    # stretch, and a 1-GPU deadline slips; FIFO run-now is on time, so the plan must be too.
    values = [301, 100, 500, 500, 300, 501, 500, 101, 100, 51, 500, 50, 101, 101, 500, 51, 500, 51, 500, 300,
              301, 51, 301, 51, 51, 100, 500, 301, 301, 501] + [1000.0] * 40
    jobs = [job("j0", gpus=1, work_h=2.0, deadline_h=8.0, submit_h=0.5),
            job("j3", gpus=1, work_h=6.0, deadline_h=14.0, submit_h=0.5),
            job("j2", gpus=1, work_h=4.0, deadline_h=6.0, submit_h=1.0),
            job("j1", gpus=4, work_h=6.0, deadline_h=12.0, submit_h=2.0)]
    trace, cluster = feed(values), Cluster(4, 0.1)
    assert simulate_fleet(jobs, trace, RunNowFIFO(), cluster).late == []
    # The wide job counted in GPU-hours, as before wide jobs held whole slots: the guard is what keeps them.
    planner = CarbonAware(trace, 4, config=replace(ROLLING, wide_whole_slots=False), jobs=jobs)
    result = simulate_fleet(jobs, trace, planner, cluster)
    assert not result.capacity_exceeded
    assert result.late == [], [(r.job.id, r.segments) for r in result.runs]
    assert any(method.endswith("+guard") for method in planner.methods)  # the guard is what kept them
    result = simulate_fleet(jobs, trace, CarbonAware(trace, 4, config=ROLLING, jobs=jobs), cluster)
    assert result.late == [] and not result.capacity_exceeded  # and with the default model
