"""Plan every managed job of a cluster at once: least total emissions, capacity and deadlines kept.

``plan_fleet`` is a pure function of the jobs' state, the clock reading
``now_h``, the partitions and the carbon intensity per zone (slot 0 = the
current hour, then the forecast). It decides which jobs run from now until the
next decision and sketches the rest of the horizon; callers re-plan as jobs
arrive, finish and forecasts change, and act on slot 0 only.

Solving: the exact form (``formulation.build_exact``) when it is small enough,
else the rolling form; HiGHS through scipy. If the deadlines cannot all be
met, the model is solved again letting jobs run late at a cost that grows
with their lateness, so the lateness is as small as capacity allows and late
jobs run as soon as they can; nothing is dropped. Last, the deadline guard
(``fleet/deadline_check.py``) checks what starts now against an earliest-deadline-first
schedule of the rest and starts more where a deadline needs it.

Where as well as when: a job whose options name several partitions
(``RunOption.partition``) is placed by the same model, each option on its own
partition's capacity and zone; moving a started job costs its migration
overhead (``JobStatus.migration_overhead_h``), so it moves only when that
pays. Such plans use the rolling form; the checks around the solve see each
job on one partition (``fleet/places.py``): where the plan runs it now, else
where it is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from greentrain.errors import ConfigError
from greentrain.fleet.formulation import JobVars, JobWindow, build_exact, build_rolling
from greentrain.fleet.deadline_check import keep_deadlines
from greentrain.fleet.latest import latest_starts
from greentrain.fleet.lpmodel import LinearModel, Solution
from greentrain.fleet.model import FleetPlan, JobPlan, JobStatus, Partition, PlannerConfig, intensity_for
from greentrain.fleet.places import group_by_partition, spans_partitions
from greentrain.fleet.slots import SlotGrid

__all__ = ["plan_fleet"]

_TOL_H = 1e-6


@dataclass(frozen=True, slots=True)
class _Problem:
    """Everything one solve needs besides the windows."""

    now_h: float
    partitions: Mapping[str, Partition]
    intensity: Mapping[str, np.ndarray]
    overhead_h: float
    free: Mapping[str, int]
    config: PlannerConfig
    large: bool = False
    """More jobs than ``config.relax_above_jobs``: the LP relaxation alone, on a stretched grid."""
    stretched: bool = False
    """The coarse slots after the first six hours twice as wide (large queues; many jobs that may move)."""


def plan_fleet(statuses: Sequence[JobStatus], *, now_h: float, partitions: Mapping[str, Partition],
               intensity: Mapping[str, np.ndarray], resume_overhead_h: float,
               free_now: Mapping[str, int] | None = None, config: PlannerConfig = PlannerConfig()) -> FleetPlan:
    """The plan for ``statuses`` at ``now_h``; ``intensity[zone]`` starts at the hour containing now.

    ``free_now``: GPUs of each partition the planner may use in slot 0 (default: all of them;
    fewer where jobs it does not manage hold some).
    """
    began = time.process_time()
    _check(statuses, partitions, intensity)
    if not statuses:
        return FleetPlan(now_h=now_h, jobs={}, planned_emissions_g=0.0, method="empty", solve_s=0.0)
    free = {name: p.capacity_gpus for name, p in partitions.items()} | dict(free_now or {})
    large = len(statuses) > config.relax_above_jobs
    stretched = large or (len(statuses) > config.stretch_places_above_jobs and spans_partitions(statuses))
    problem = _Problem(now_h, partitions, intensity, resume_overhead_h, free, config, large=large,
                       stretched=stretched)
    exact = (_binaries(_drafts(statuses, problem, late_all=False, margin_h=0.0), now_h) <= config.exact_max_binaries
             and not spans_partitions(statuses))
    # The exact form's plan is what will run, whole slots and all: it needs no rounding margin, nor the
    # packing check. The rolling form tries with both, then without the margin; if deadlines still
    # conflict, jobs may run late, but those the packing says must start now still do (a job that can
    # make its deadline is not given up for one that cannot), and only then is the check dropped.
    must = frozenset() if exact else _must_start(statuses, problem)
    for margin_h, start_now in dict.fromkeys([(0.0 if exact else config.margin_h, must), (0.0, must)]):
        drafts = _drafts(statuses, problem, late_all=False, margin_h=margin_h)
        solution, vars_, grid, method = _solve(_windows(drafts, problem, exact, start_now), problem, exact)
        if solution.ok and method != "rolling-lp" or config.rounding == "lp" or problem.large:
            break
    if not solution.ok:
        drafts = _drafts(statuses, problem, late_all=True, margin_h=0.0)
        for start_now in dict.fromkeys([must, frozenset()]):
            solution, vars_, grid, method = _solve(_windows(drafts, problem, exact, start_now), problem, exact)
            if solution.ok:
                break
        method += "+late"
    if not solution.ok:  # HiGHS ran out of time without a plan (never seen short of a loaded machine)
        return _earliest_deadline_first(statuses, problem, f"edf (HiGHS status {solution.status})",
                                        time.process_time() - began)
    plan = _extract(solution, vars_, grid, problem, method, time.process_time() - began)
    return _keep_deadlines(plan, statuses, problem)


def _keep_deadlines(plan: FleetPlan, statuses: Sequence[JobStatus], problem: _Problem) -> FleetPlan:
    """The plan, with the jobs started now that the deadline guard (``fleet/deadline_check.py``) needs.

    The plan's later hours are a sketch (GPU-hours, rounded later); what runs now is what the deadlines
    depend on, so that is checked against a whole-GPU schedule with every restart overhead, whichever
    form found the plan. Only slot 0 is changed: finish and emissions stay the solver's.
    """
    jobs = dict(plan.jobs)
    planned = {st.job_id: o for st in statuses if (o := jobs[st.job_id].option) is not None}
    option_count = {st.job_id: len(st.options) for st in statuses}
    for name, views in group_by_partition(statuses, list(problem.partitions), planned).items():
        if not views:
            continue
        by_id = {v.status.job_id: v for v in views}
        chosen = {j: by_id[j].indices.index(o) for j, o in planned.items() if j in by_id}
        # a job with options on other partitions has fewer in its view here
        movable = frozenset(j for j, v in by_id.items() if len(v.indices) < option_count[j])
        kept = keep_deadlines([v.status for v in views], chosen, now_h=problem.now_h, free_now=problem.free[name],
                              capacity=problem.partitions[name].capacity_gpus, resume_overhead_h=problem.overhead_h,
                              movable=movable)
        for job_id in chosen.keys() | kept.keys():
            if chosen.get(job_id) != kept.get(job_id):
                option = by_id[job_id].full(kept[job_id]) if job_id in kept else None
                jobs[job_id] = replace(jobs[job_id], option=option,
                                       next_start_h=problem.now_h if option is not None else None)
    if jobs == plan.jobs:
        return plan
    return replace(plan, jobs=jobs, method=plan.method + "+guard")


def _earliest_deadline_first(statuses: Sequence[JobStatus], problem: _Problem, method: str,
                             solve_s: float) -> FleetPlan:
    """A plan without the solver: jobs that cannot stop keep running, then the others by deadline while
    their GPUs are free. Carbon-blind, but it keeps capacity and loses no time on the deadlines."""
    free = dict(problem.free)
    order = sorted(statuses, key=lambda st: (not (st.running is not None and not st.can_pause), st.deadline_h))
    plans: dict[str, JobPlan] = {}
    for st in order:
        option = st.local_option
        runs = (st.running is not None and not st.can_pause) or st.options[option].gpus <= free[st.part(option)]
        if runs:
            free[st.part(option)] -= st.options[option].gpus
        finish_h = problem.now_h + st.needed_h(option, problem.overhead_h) if runs else None
        plans[st.job_id] = JobPlan(job_id=st.job_id, option=option if runs else None,
                                   next_start_h=problem.now_h if runs else None, finish_h=finish_h,
                                   planned_emissions_g=0.0,
                                   late=finish_h is not None and finish_h > st.deadline_h + _TOL_H,
                                   infeasible_alone=problem.now_h + st.needed_h(option, problem.overhead_h)
                                   > st.deadline_h + _TOL_H)
    return FleetPlan(now_h=problem.now_h, jobs=plans, planned_emissions_g=0.0, method=method, solve_s=solve_s)


def _check(statuses: Sequence[JobStatus], partitions: Mapping[str, Partition],
           intensity: Mapping[str, np.ndarray]) -> None:
    problems = []
    for st in statuses:
        names = list(dict.fromkeys([st.partition] + [st.part(o) for o in range(len(st.options))]))
        unknown = [n for n in names if n not in partitions]
        if unknown:
            problems.append(f"job {st.job_id}: partition {unknown[0]!r} is not one of {', '.join(partitions)}")
            continue
        if all(o.gpus > partitions[st.part(i)].capacity_gpus for i, o in enumerate(st.options)):
            places = ", ".join(f"{n} has {partitions[n].capacity_gpus}" for n in names)
            problems.append(f"job {st.job_id}: needs {st.options[0].gpus} GPUs, partition {places}")
        for name in names:
            if partitions[name].zone not in intensity:
                problems.append(f"partition {name}: no carbon intensity for zone {partitions[name].zone!r}")
    if problems:
        raise ConfigError("\n".join(dict.fromkeys(problems)))


_Draft = tuple[JobStatus, float, float | None]  # status, window end, hard end (None: may run late)


def _drafts(statuses: Sequence[JobStatus], problem: _Problem, *, late_all: bool, margin_h: float) -> list[_Draft]:
    """Each job's window: up to its deadline (less the margin its slack allows), or on past it."""
    now_h, overhead_h = problem.now_h, problem.overhead_h
    serial_h = dict.fromkeys(problem.partitions, 0.0)  # every job one after another: an end nothing passes
    for st in statuses:
        share = st.options[0].gpus / problem.partitions[st.partition].capacity_gpus
        serial_h[st.partition] += st.needed_h(0, overhead_h) * share
    drafts: list[_Draft] = []
    for st in statuses:
        fastest_h = min(st.needed_h(o, overhead_h) for o in range(len(st.options)))
        if now_h + fastest_h <= st.deadline_h + _TOL_H and not late_all:
            hard = max(st.deadline_h - margin_h, now_h + fastest_h)
            drafts.append((st, hard, hard))
        else:
            late_end = max(st.deadline_h, now_h) + st.needed_h(0, overhead_h) + serial_h[st.partition] + 1.0
            drafts.append((st, late_end, None))
    return drafts


def _must_start(statuses: Sequence[JobStatus], problem: _Problem) -> frozenset[str]:
    """Jobs whose latest start (``latest_starts``) comes before the next whole hour: they run now.

    Most urgent first (latest start, then deadline; then those with no room left), as many as fit the GPUs free now besides the jobs
    that cannot be stopped: forcing more than fit would make the model infeasible and lose them all.
    """
    next_h = math.floor(problem.now_h + _TOL_H) + 1.0
    capacity = {name: p.capacity_gpus for name, p in problem.partitions.items()}
    latest = latest_starts(statuses, now_h=problem.now_h, capacity=capacity, resume_overhead_h=problem.overhead_h)
    free = dict(problem.free)
    for st in statuses:
        if st.running is not None and not st.can_pause:
            free[st.part(st.running)] -= st.options[st.running].gpus
    # Jobs the packing placed come first: a job it found no room for is at risk whatever happens, and
    # must not push out one that can still make its deadline.
    urgent = sorted((start_h is None, start_h or 0.0, st.deadline_h, st.job_id, st) for st in statuses
                    if st.job_id in latest and ((start_h := latest[st.job_id]) is None or start_h < next_h - _TOL_H))
    chosen = []
    for *_, job_id, st in urgent:
        if st.running is not None and not st.can_pause:
            chosen.append(job_id)
            continue
        option = st.local_option
        if st.options[option].gpus <= free[st.part(option)]:
            free[st.part(option)] -= st.options[option].gpus
            chosen.append(job_id)
    return frozenset(chosen)


def _windows(drafts: list[_Draft], problem: _Problem, exact: bool,
             start_now: frozenset[str] = frozenset()) -> tuple[list[JobWindow], SlotGrid]:
    grid = SlotGrid(problem.now_h, max(end for _, end, _ in drafts), coarse=not exact,
                    stretch=2 if problem.stretched and not exact else 1)
    by_zone = {zone: grid.mean_per_slot(intensity_for(values, grid.hours))
               for zone, values in problem.intensity.items()}
    zone = {name: p.zone for name, p in problem.partitions.items()}
    windows = [JobWindow(st, np.stack([by_zone[zone[st.part(o)]] for o in range(len(st.options))]), end, hard,
                         start_now=st.job_id in start_now) for st, end, hard in drafts]
    return windows, grid


def _binaries(drafts: list[_Draft], now_h: float) -> int:
    """Binary variables of the exact form (hourly slots)."""
    return sum(len(st.options) * max(1, math.ceil(end - now_h)) for st, end, _ in drafts)


def _solve(built: tuple[list[JobWindow], SlotGrid], problem: _Problem,
           exact: bool) -> tuple[Solution, list[JobVars], SlotGrid, str]:
    windows, grid = built
    scale_g = max(max(o.power_kw for o in w.status.options) * float(w.intensity.max()) for w in windows) or 1.0
    capacity = {name: p.capacity_gpus for name, p in problem.partitions.items()}
    free = dict(problem.free)
    config = problem.config
    if exact:
        model = LinearModel()
        vars_ = build_exact(model, windows, grid, resume_overhead_h=problem.overhead_h, scale_g=scale_g,
                            capacity=capacity, free_now=free)
        # Solved to optimality, not to ``mip_rel_gap``: the tie-break that sends equal-cost work to the
        # earlier hour is far below that gap, and a small exact model closes it at no measurable cost.
        solution = model.solve(time_limit_s=config.time_limit_s, mip_rel_gap=0.0, mip_abs_gap=0.0)
        if solution.ok:
            return solution, vars_, grid, "exact"
        windows, grid = _windows([(w.status, w.end_h, w.hard_end_h) for w in windows], problem, False)
    model = LinearModel()
    vars_ = build_rolling(model, windows, grid, resume_overhead_h=problem.overhead_h, scale_g=scale_g,
                          capacity=capacity, free_now=free,
                          wide_whole_slots=config.wide_whole_slots and not problem.large,
                          restarts_ahead_h=config.restarts_ahead_h if problem.stretched else None)
    if config.rounding == "milp" and not problem.large:
        return model.solve(time_limit_s=config.time_limit_s, mip_rel_gap=config.mip_rel_gap), vars_, grid, "rolling"
    wide = _wide_decisions(model, vars_, config) if config.rounding == "fix" else {}
    relaxed = model.solve(time_limit_s=config.time_limit_s, relax=True, interior=problem.large, fixed=wide or None)
    if config.rounding == "lp" or problem.large or relaxed.x is None:
        return relaxed, vars_, grid, "rolling-lp"
    # Relax and fix: keep the LP's whole decisions, branch only on the jobs it splits.
    binaries = model.integral()
    values = relaxed.x[binaries]
    whole = np.abs(values - np.round(values)) < 1e-6
    if whole.all():
        return relaxed, vars_, grid, "rolling"
    fixed = wide | {int(i): float(round(v)) for i, v in zip(binaries[whole], values[whole], strict=True)}
    solution = model.solve(time_limit_s=config.time_limit_s, mip_rel_gap=config.mip_rel_gap, fixed=fixed)
    if not solution.ok:  # the LP's whole decisions cannot be completed: branch on every job after all
        solution = model.solve(time_limit_s=config.time_limit_s, mip_rel_gap=config.mip_rel_gap)
    return (solution if solution.ok else relaxed), vars_, grid, "rolling" if solution.ok else "rolling-lp"


def _wide_decisions(model: LinearModel, vars_: list[JobVars], config: PlannerConfig) -> dict[int, float]:
    """Jobs wider than half a partition: their whole-slot holds and their run-now decision, branched on first
    with every other job relaxed ({} when there are none, or nothing is found in the time allowed).

    The relaxation's whole decisions now are the ones the wide jobs' binaries exist to correct (small jobs
    "beside" a wide one in the clean hours), so relax and fix alone would keep them; these few binaries
    decided first, the relaxation and the fix that follow plan the rest around them. Branching on every job
    at once finds about the same plans at twice the CPU (docs/benchmarks.md, "Jobs wider than half the
    cluster")."""
    wide = [v for v in vars_ if v.hold_cols]
    if not wide:
        return {}
    cols = np.concatenate([c for v in wide for c in v.hold_cols] + [np.asarray(v.now_cols, dtype=int) for v in wide])
    staged = model.solve(time_limit_s=config.time_limit_s, mip_rel_gap=config.mip_rel_gap, integral_only=cols)
    if not staged.ok or staged.x is None:
        return {}
    return {int(i): float(round(staged.x[i])) for i in cols}


def _extract(solution: Solution, all_vars: list[JobVars], grid: SlotGrid, problem: _Problem, method: str,
             solve_s: float) -> FleetPlan:
    x = solution.x
    assert x is not None
    plans: dict[str, JobPlan] = {}
    used = {name: np.zeros(grid.count) for name in problem.partitions}
    total_g = 0.0
    rounded = _round_now(x, all_vars, grid, problem) if method.startswith("rolling-lp") else None
    for v in all_vars:
        st, w = v.window.status, v.window
        if rounded is not None:
            option = rounded.get(st.job_id)
        else:
            option = next((o for o, col in enumerate(v.now_cols) if x[col] > 0.5), None)
        run_h = np.zeros(grid.count)  # hours run per slot, all options
        emissions_g = 0.0
        for o, opt in enumerate(st.options):
            slots = v.run_slots[o]
            hours = np.clip(x[v.run_cols[o]], 0.0, None)
            run_h[slots] += hours
            emissions_g += float(opt.power_kw * (w.intensity[o][slots] @ hours))
            used_here = used[st.part(o)]
            if v.active_cols:  # exact: a binary per slot says whether the job holds its GPUs
                used_here[slots] += opt.gpus * (x[v.active_cols[o]] > 0.5)
                continue
            used_here[slots] += opt.gpus * hours / grid.lengths[slots]  # rolling: GPU-hours per hour
            if option == o:  # rolling: slot 0 is the binary; its hours are a constant of the model
                run_h[0] += v.now_run_h[o]
                emissions_g += opt.power_kw * w.intensity[o][0] * v.now_run_h[o]
                used_here[0] += opt.gpus
        total_g += emissions_g
        plans[st.job_id] = _job_plan(st, option, run_h, grid, emissions_g, problem)
    return FleetPlan(now_h=problem.now_h, jobs=plans, planned_emissions_g=total_g, method=method,
                     solve_s=solve_s, planned_gpus=used)


def _round_now(x: np.ndarray, all_vars: list[JobVars], grid: SlotGrid, problem: _Problem) -> dict[str, int]:
    """Slot 0 in whole jobs from the LP relaxation: the jobs that cannot be stopped, then those that
    would miss their deadline by waiting for the next slot (earliest deadline first), then the rest
    by the share of the slot the LP runs them (at least half), each while its GPUs are free."""
    wait_h = float(grid.lengths[0])
    ranked = []
    for v in all_vars:
        st = v.window.status
        shares = [float(x[c]) for c in v.now_cols]
        option = st.running if st.running is not None and not st.can_pause else int(np.argmax(shares))
        fastest_h = min(st.needed_h(o, problem.overhead_h) if st.running != o
                        else problem.overhead_h + st.remaining_h / st.options[o].speed for o in range(len(st.options)))
        urgent = problem.now_h + wait_h + fastest_h > st.deadline_h + _TOL_H
        rank = 0 if option == st.running and not st.can_pause else (1 if urgent else 2)
        if rank == 2 and shares[option] < 0.5:
            continue
        order = st.deadline_h if rank == 1 else -shares[option]
        ranked.append((rank, order, st.running is None, st.deadline_h, st.job_id, option, st))
    free = dict(problem.free)
    chosen: dict[str, int] = {}
    for rank, _, _, _, job_id, option, st in sorted(ranked):
        gpus = st.options[option].gpus
        if rank == 0 or gpus <= free[st.part(option)]:
            chosen[job_id] = option
            free[st.part(option)] -= gpus
    return chosen


def _job_plan(st: JobStatus, option: int | None, run_h: np.ndarray, grid: SlotGrid, emissions_g: float,
              problem: _Problem) -> JobPlan:
    active = np.flatnonzero(run_h > 1e-7)
    next_start = problem.now_h if option is not None else (float(grid.edges[active[0]]) if active.size else None)
    finish = float(grid.edges[active[-1]] + run_h[active[-1]]) if active.size else None
    fastest_h = min(st.needed_h(o, problem.overhead_h) for o in range(len(st.options)))
    return JobPlan(job_id=st.job_id, option=option, next_start_h=next_start, finish_h=finish,
                   planned_emissions_g=emissions_g,
                   late=finish is not None and finish > st.deadline_h + _TOL_H,
                   infeasible_alone=problem.now_h + fastest_h > st.deadline_h + _TOL_H)
