"""The deadline guard: act on a plan only if every deadline stays reachable afterwards.

The rolling form plans later hours in GPU-hours and rounds only the current
slot, so a plan can look feasible while its GPUs cannot actually be packed
side by side in time, and restart overheads of paused jobs pile up. The
guard checks the decision itself: the chosen jobs run until the next
decision, then every unfinished job runs by earliest deadline first (a list
schedule on whole GPUs, restart overheads included). If that schedule misses
a deadline that earliest-deadline-first from now would meet, jobs that
schedule starts now are added to the decision (most urgent first, displacing
the chosen job with the latest deadline when GPUs run short) until the
check holds. The check is a sufficient one: where it holds, a feasible
schedule of the remaining work exists; each round keeps one, so while no
job arrives, deadlines met at one decision stay reachable. Arrivals are not
foreseen: a job that arrives needing GPUs the plan has just given away can
still be late where FIFO, which starts everything at once, happened not to be.
The next decision is taken to come at the next whole hour or the first
completion of a job started now, whichever is sooner, as in the simulator; a
controller that re-plans less often gets a looser check.

Where as well as when: the guard sees one partition, and a job that may also
run elsewhere (``movable``) misses here only if no other place takes it. So a
miss of a job that can run nowhere else outweighs the misses of every movable
job: the guard does not give up a pinned job's deadline to keep movable jobs,
which the plan brought here, running where they block it (measured: a 16-GPU
job pinned to a 24-GPU partition finished 14 h late behind 1-GPU jobs moved in
from other grids, in a weekly set of 300 jobs).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence

from greentrain.fleet.model import JobStatus

__all__ = ["keep_deadlines", "edf_misses"]

_TOL_H = 1e-6


def edf_misses(statuses: Sequence[JobStatus], now_run: Mapping[str, int], *, now_h: float, until_h: float,
               free_now: int, capacity: int, resume_overhead_h: float, movable: frozenset[str] = frozenset()) -> int:
    """Deadlines missed when ``now_run`` (job id -> option) runs from ``now_h`` and, from the next
    decision on, jobs start by earliest deadline first while whole GPUs are free; a started job runs
    to its end. The next decision comes at ``until_h`` or when a job of ``now_run`` finishes, if sooner
    (the callers re-plan at every completion).

    ``free_now``: GPUs free for these jobs now; from ``until_h`` on all ``capacity`` is theirs.
    A decision wider than ``free_now`` counts as missing every deadline. ``movable``: jobs that may run
    on another partition; each miss of any other job counts as more than all of theirs together.
    """
    pinned_miss = len(movable) + 1

    def cost(job_id: str) -> int:
        return 1 if job_id in movable else pinned_miss

    in_use = 0
    ends: list[tuple[float, int]] = []  # (finish, gpus) of running jobs
    waiting: list[tuple[float, str, JobStatus]] = []
    missed = 0
    for st in statuses:
        option = now_run.get(st.job_id)
        if option is None:
            waiting.append((st.deadline_h, st.job_id, st))
            continue
        finish_h = now_h + st.needed_h(option, resume_overhead_h)
        missed += cost(st.job_id) if finish_h > st.deadline_h + _TOL_H else 0
        in_use += st.options[option].gpus
        heapq.heappush(ends, (finish_h, st.options[option].gpus))
    if in_use > free_now:
        return pinned_miss * (len(statuses) + 1)
    waiting.sort()
    return missed + _list_schedule(waiting, ends, in_use, min([until_h] + [end_h for end_h, _ in ends]),
                                   capacity=capacity, resume_overhead_h=resume_overhead_h, cost=cost)


def _list_schedule(waiting: list[tuple[float, str, JobStatus]], ends: list[tuple[float, int]], in_use: int,
                   t_h: float, *, capacity: int, resume_overhead_h: float, cost: Callable[[str], int]) -> int:
    """Deadlines missed (each weighted by ``cost``) starting ``waiting`` (in its order) from ``t_h``
    whenever whole GPUs are free; ``ends`` is a heap of (finish, gpus) of the jobs running, ``in_use``
    their GPUs."""
    missed = 0
    while True:
        while ends and ends[0][0] <= t_h + _TOL_H:
            in_use -= heapq.heappop(ends)[1]
        started = []
        for item in waiting:
            st = item[2]
            option = st.running if st.running is not None else 0
            gpus = st.options[option].gpus
            if gpus <= capacity - in_use:
                # waiting at the decision, so a job that ran before pays the restart (a migration where it moves)
                restart_h = resume_overhead_h if st.running == option else st.overhead_h(option, resume_overhead_h)
                finish_h = t_h + restart_h + st.remaining_h / st.options[option].speed
                missed += cost(st.job_id) if finish_h > st.deadline_h + _TOL_H else 0
                in_use += gpus
                heapq.heappush(ends, (finish_h, gpus))
                started.append(item[1])
        waiting = [item for item in waiting if item[1] not in started]
        if not waiting:
            return missed
        if not ends:  # nothing runs and nothing fits: a job wider than the partition
            return missed + sum(cost(item[1]) for item in waiting)
        t_h = max(t_h, ends[0][0])


def keep_deadlines(statuses: Sequence[JobStatus], chosen: Mapping[str, int], *, now_h: float, free_now: int,
                   capacity: int, resume_overhead_h: float, movable: frozenset[str] = frozenset()) -> dict[str, int]:
    """``chosen`` (job id -> option for now), with the jobs added that deadlines need; see the module.
    ``movable``: jobs that may also run on another partition (see ``edf_misses``)."""
    until_h = math.floor(now_h + _TOL_H) + 1.0  # the next whole hour: the latest next decision

    def misses(run: Mapping[str, int]) -> int:
        return edf_misses(statuses, run, now_h=now_h, until_h=until_h, free_now=free_now, capacity=capacity,
                          resume_overhead_h=resume_overhead_h, movable=movable)

    decided = dict(chosen)
    best, best_misses = decided, misses(decided)
    if best_misses == 0:
        return decided
    fixed = {st.job_id for st in statuses if st.running is not None and not st.can_pause}
    deadline_h = {st.job_id: st.deadline_h for st in statuses}
    orders = [_edf_now(statuses, free_now, keep_running=True), _edf_now(statuses, free_now, keep_running=False)]
    if movable:  # the jobs with nowhere else to go first
        orders.append(_edf_now(statuses, free_now, keep_running=False, later=movable))
    for edf in orders:
        trial = decided
        for job_id in sorted(edf.keys() - decided.keys(), key=lambda j: (deadline_h[j], j)):
            admitted = _admit(trial, job_id, edf[job_id], statuses, free_now, keep=fixed | edf.keys())
            if admitted is None:
                break
            trial = admitted
            if (missed := misses(trial)) < best_misses:
                best, best_misses = trial, missed
            if missed == 0:
                return best
        if (missed := misses(edf)) < best_misses:
            best, best_misses = edf, missed
    return best


def _edf_now(statuses: Sequence[JobStatus], free_now: int, *, keep_running: bool,
             later: frozenset[str] = frozenset()) -> dict[str, int]:
    """What earliest deadline first starts now: running jobs kept (or not), then by deadline while GPUs are
    free, the jobs in ``later`` after all the others."""
    run: dict[str, int] = {}
    free = free_now
    for st in statuses:
        if st.running is not None and (keep_running or not st.can_pause):
            run[st.job_id] = st.running
            free -= st.options[st.running].gpus
    for st in sorted(statuses, key=lambda s: (s.job_id in later, s.deadline_h, s.job_id)):
        option = st.running if st.running is not None else 0
        if st.job_id not in run and st.options[option].gpus <= free:
            run[st.job_id] = option
            free -= st.options[option].gpus
    return run


def _admit(run: dict[str, int], job_id: str, option: int, statuses: Sequence[JobStatus], free_now: int,
           keep: set[str]) -> dict[str, int] | None:
    """``run`` with ``job_id`` added, leaving out chosen jobs not in ``keep`` (latest deadline first) until it fits."""
    by_id = {st.job_id: st for st in statuses}
    trial = dict(run) | {job_id: option}
    spare = sorted((j for j in trial if j not in keep and j != job_id), key=lambda j: -by_id[j].deadline_h)
    while sum(by_id[j].options[o].gpus for j, o in trial.items()) > free_now:
        if not spare:
            return None
        del trial[spare.pop(0)]
    return trial
