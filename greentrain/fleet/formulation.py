"""The fleet plan as a linear model, in two forms sharing one set of windows and costs.

*Rolling* (any size): slot 0 (now until the next whole hour) has one binary
run/wait variable per job and width, so what starts now fits the cluster in
whole GPUs; every later slot has continuous run-hours, capacity counted in
GPU-hours. Re-solved at every decision, only slot 0 is acted on.

*Exact* (small problems): a binary per job, width and slot; a job runs whole
slots from their start except the slot where it finishes; every start after
the first costs the resume overhead. It is the optimum of the simulator's own
model, which the tests check against brute force.

A job that may run on several partitions has an option per place and width
(``RunOption.partition``): each counts against its own partition's capacity at
its own zone's intensity. In the rolling form a started job that runs anywhere
but where its state is pays the migration overhead once (a continuous
"moved" level that bounds every such option's level from above), instead of a
resume: a move is a pause plus a resume elsewhere, with its own overhead.

In both, a job's run-hours lie in its window: from now to its deadline (less
a margin where its slack allows), or, where the deadline cannot be met, on
past it with a cost that grows with lateness, so it runs as soon as it can.
Costs are grams of CO2eq divided by a scale, so HiGHS sees numbers near 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from greentrain.fleet.lpmodel import LinearModel
from greentrain.fleet.model import JobStatus
from greentrain.fleet.slots import SlotGrid

__all__ = ["JobWindow", "JobVars", "CapacityRows", "build_rolling", "build_exact", "LATE_COST"]

LATE_COST = 100.0
"""Cost of one run-hour one hour past its deadline, in units of the dearest run-hour of the horizon."""
_EARLY = 1e-6
"""Per slot: among equal plans, the earlier one (a tie-break only)."""
WHOLE_SLOTS_AHEAD_H = 24.0
"""Jobs wider than half their partition hold whole slots in the plan's first day (hourly slots); further out
GPU-hours, as a sketch (``_hold_whole_slots``)."""


@dataclass(frozen=True, slots=True)
class JobWindow:
    """One job's place in the model."""

    status: JobStatus
    intensity: np.ndarray
    """g/kWh per option and slot ([option, slot]: each option on its partition's zone)."""
    end_h: float
    """Last hour the job may run in this model."""
    hard_end_h: float | None
    """The deadline the model must meet (with margin); None when the job may run late."""
    start_now: bool = False
    """Rolling form: the job must run in slot 0 (its latest start is before the next slot)."""

    def late_cost(self, slot_end_h: np.ndarray) -> np.ndarray:
        return LATE_COST * np.clip(slot_end_h - self.status.deadline_h, 0.0, None)


@dataclass(slots=True)
class JobVars:
    """Indices of one job's variables; ``run`` is (option, slot) -> run-hours (or a constant in slot 0)."""

    window: JobWindow
    run_cols: list[np.ndarray] = field(default_factory=list)
    run_slots: list[np.ndarray] = field(default_factory=list)
    now_cols: list[int] = field(default_factory=list)
    """Per option: the binary variable 'runs in slot 0'."""
    now_run_h: list[float] = field(default_factory=list)
    """Rolling form: per option, the hours it would run in slot 0."""
    active_cols: list[np.ndarray] = field(default_factory=list)
    """Exact form: per option, the binaries 'holds its GPUs in this slot'."""
    hold_cols: list[np.ndarray] = field(default_factory=list)
    """Rolling form, options wider than half the partition (``wide_whole_slots``): the binaries 'holds its
    GPUs for this later slot'."""


class CapacityRows:
    """Collects (partition, slot) -> GPU coefficients, then adds one row per pair."""

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self._slots: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._coefs: list[np.ndarray] = []
        self._names: dict[str, int] = {}

    def add(self, partition: str, slots: np.ndarray, cols: np.ndarray, gpus: float | np.ndarray) -> None:
        pid = self._names.setdefault(partition, len(self._names))
        self._parts.append(np.full(cols.size, pid))
        self._slots.append(np.asarray(slots))
        self._cols.append(np.asarray(cols))
        self._coefs.append(np.broadcast_to(np.asarray(gpus, dtype=float), (cols.size,)).copy())

    def emit(self, model: LinearModel, limit: dict[tuple[str, int], float]) -> None:
        """One row per (partition, slot): sum <= ``limit[(partition, slot)]``."""
        if not self._cols:
            return
        parts, slots = np.concatenate(self._parts), np.concatenate(self._slots)
        cols, coefs = np.concatenate(self._cols), np.concatenate(self._coefs)
        if cols.size == 0:
            return
        order = np.lexsort((slots, parts))
        parts, slots, cols, coefs = parts[order], slots[order], cols[order], coefs[order]
        cut = np.flatnonzero((np.diff(parts) != 0) | (np.diff(slots) != 0)) + 1
        names = {pid: name for name, pid in self._names.items()}
        for lo, hi in zip(np.concatenate([[0], cut]), np.concatenate([cut, [cols.size]]), strict=True):
            model.row(cols[lo:hi], coefs[lo:hi], ub=limit[(names[int(parts[lo])], int(slots[lo]))])


def build_rolling(model: LinearModel, windows: list[JobWindow], grid: SlotGrid, *, resume_overhead_h: float,
                  scale_g: float, capacity: dict[str, int], free_now: dict[str, int],
                  wide_whole_slots: bool = True, restarts_ahead_h: float | None = None) -> list[JobVars]:
    """Add the rolling form to ``model``; return each job's variables.

    Restarts are counted on the job's running level (slot 0: 0 or 1; later: the fraction of
    the slot it runs), as in the LP relaxation of start-up costs: every rise of the level is
    a start, every start after the first costs the resume overhead. A plan that pauses a job
    now and resumes it later pays for that, and so does a fragmented plan further out.
    ``restarts_ahead_h``: rises counted only in the later slots starting within this many hours (None: all);
    a started job paused now still pays its one restart (``_restarts``).
    """
    caps = CapacityRows()
    out = []
    for w in windows:
        vars_ = JobVars(w)
        st, later_h = w.status, grid.overlap(w.end_h)
        slots = np.flatnonzero(later_h[1:] > 1e-9) + 1
        work_cols: list[np.ndarray] = []
        work_vals: list[np.ndarray] = []
        moved = _moved(model, st, resume_overhead_h)
        moving: list[tuple[np.ndarray, float]] = []
        for o, opt in enumerate(st.options):
            part, intensity = st.part(o), w.intensity[o]
            run_h = min(grid.lengths[0], st.needed_h(o, resume_overhead_h))
            counted_h = run_h if w.hard_end_h is None else min(run_h, max(0.0, w.hard_end_h - grid.now_h))
            late = float(w.late_cost(np.array([grid.now_h + run_h]))[0])
            cost = (opt.power_kw * intensity[0] / scale_g + late) * run_h
            forced = st.running == o and not st.can_pause
            y = model.add([cost], 1.0 if forced else 0.0, 1.0, integral=True)
            vars_.now_cols.append(int(y[0]))
            vars_.now_run_h.append(run_h)
            work_cols.append(y)
            work_vals.append(np.array([opt.speed * counted_h]))
            caps.add(part, np.array([0]), y, opt.gpus)
            x_cost = (opt.power_kw * intensity[slots] / scale_g + _EARLY * slots
                      + w.late_cost(grid.edges[slots + 1]))
            x = model.add(x_cost, 0.0, later_h[slots])
            vars_.run_cols.append(x)
            vars_.run_slots.append(slots)
            work_cols.append(x)
            work_vals.append(np.full(x.size, opt.speed))
            if moved is not None and st.moves(o):
                _bound_by(model, moved, y, x, grid.lengths[slots])
                moving += [(y, run_h), (x, 1.0)]
            near = (grid.edges[slots] < grid.now_h + WHOLE_SLOTS_AHEAD_H
                    if wide_whole_slots and 2 * opt.gpus > capacity[part] else None)
            if near is not None and near.any():
                vars_.hold_cols.append(_hold_whole_slots(model, caps, part, slots[near], x[near], opt.gpus,
                                                         grid.lengths[slots[near]]))
                caps.add(part, slots[~near], x[~near], opt.gpus)
            else:
                caps.add(part, slots, x, opt.gpus)
        if w.start_now:
            model.row(vars_.now_cols, 1.0, lb=1.0)
        counted = slots if restarts_ahead_h is None else slots[grid.edges[slots] < grid.now_h + restarts_ahead_h]
        resumes = _restarts(model, vars_, grid, counted, st)
        work_cols.append(resumes)
        work_vals.append(np.array([-resume_overhead_h]))
        if moved is not None:
            work_cols.append(moved[0])
            work_vals.append(np.array([-moved[1]]))
            _moved_share(model, moved, moving, st, resume_overhead_h)
        continuing_h = st.overhead_left_h if st.running is not None else 0.0
        model.row(np.concatenate(work_cols), np.concatenate(work_vals), lb=st.remaining_h + continuing_h)
        if len(st.options) > 1:
            model.row(vars_.now_cols, 1.0, ub=1.0)
            for i, k in enumerate(slots):
                model.row([int(c[i]) for c in vars_.run_cols], 1.0, ub=float(later_h[k]))
        out.append(vars_)
    caps.emit(model, _limits(windows, grid, capacity, free_now, gpu_hours=True))
    _wide_job_rows(model, out, grid, capacity)
    return out


def _moved(model: LinearModel, st: JobStatus, resume_overhead_h: float) -> tuple[np.ndarray, float] | None:
    """A started job that may run elsewhere: (the 'moved' level, in [0, 1], and the running hours without
    progress it costs beyond a resume), or None when it cannot move or moving costs no more.

    The rolling form pays a paused job's restart already (``_restarts``); a move adds the difference to the
    migration overhead, and a running job moved (no pause seen on its level) the whole migration."""
    if st.migration_overhead_h is None or not any(st.moves(o) for o in range(len(st.options))):
        return None
    extra_h = st.migration_overhead_h - (0.0 if st.running is not None else resume_overhead_h)
    if extra_h <= 0.0:
        return None
    return model.add(np.zeros(1), 0.0, 1.0), extra_h


def _moved_share(model: LinearModel, moved: tuple[np.ndarray, float], moving: list[tuple[np.ndarray, float]],
                 st: JobStatus, resume_overhead_h: float) -> None:
    """The 'moved' level is at least the share of the job's running that lies elsewhere.

    A job that moves runs there at most all its remaining time, overhead included, so the share is valid for
    every real schedule; without it the relaxation spreads a move thin over many slots (each slot's level, and
    so the level bound, small) and pays a sliver of the migration."""
    most_h = max(st.needed_h(o, resume_overhead_h) for o in range(len(st.options)) if st.moves(o))
    cols = np.concatenate([c for c, _ in moving] + [moved[0]])
    vals = np.concatenate([np.full(c.size, coef / most_h) for c, coef in moving] + [np.array([-1.0])])
    model.row(cols, vals, ub=0.0)


def _bound_by(model: LinearModel, moved: tuple[np.ndarray, float], y: np.ndarray, x: np.ndarray,
              lengths_h: np.ndarray) -> None:
    """The option's level, now and in every later slot, is at most the 'moved' level."""
    m = int(moved[0][0])
    model.row([int(y[0]), m], [1.0, -1.0], ub=0.0)
    if x.size:
        index = np.arange(x.size)
        model.rows(np.r_[index, index], np.r_[x, np.full(x.size, m)], np.r_[np.ones(x.size), -lengths_h],
                   lb=np.full(x.size, -np.inf), ub=np.zeros(x.size))


def _hold_whole_slots(model: LinearModel, caps: CapacityRows, partition: str, slots: np.ndarray, x: np.ndarray,
                      gpus: int, lengths_h: np.ndarray) -> np.ndarray:
    """A job wider than half its partition holds its GPUs for every later slot it runs in, whole.

    In GPU-hours a wide job could run 60 % of an hour beside small jobs filling the rest; in the simulator
    and on Slurm jobs pause only on the hour, so the small jobs started beside it would keep it out of the
    whole hour. With that relaxation the plan starts small jobs in the clean hours it means the wide job to
    have, and the wide job is left the dirty hours its deadline forces. A binary per slot says the job holds
    the partition's ``gpus`` for the slot (its last slot too: conservative); they are returned."""
    hold = model.add(np.zeros(slots.size), 0.0, 1.0, integral=True)
    index = np.arange(slots.size)
    model.rows(np.r_[index, index], np.r_[x, hold], np.r_[np.ones(slots.size), -lengths_h],
               lb=np.full(slots.size, -np.inf), ub=np.zeros(slots.size))
    caps.add(partition, slots, hold, gpus * lengths_h)
    return hold


def _wide_job_rows(model: LinearModel, all_vars: list[JobVars], grid: SlotGrid, capacity: dict[str, int]) -> None:
    """At most one job wider than half the partition runs at a time, at most two wider than a third.

    Valid for every real schedule, and they keep the LP from planning two wide jobs side by side in
    one hour as if time-sharing it were free (it costs a pause and a resume each)."""
    for share, at_once in ((2, 1.0), (3, 2.0)):
        rows = CapacityRows()
        for v in all_vars:
            st = v.window.status
            for o, opt in enumerate(st.options):
                if opt.gpus * share > capacity[st.part(o)]:
                    rows.add(st.part(o), v.run_slots[o], v.run_cols[o], 1.0)
        rows.emit(model, {(part, k): at_once * float(grid.lengths[k]) for part in capacity
                          for k in range(grid.count)})


def _restarts(model: LinearModel, vars_: JobVars, grid: SlotGrid, slots: np.ndarray, st: JobStatus) -> np.ndarray:
    """A variable that is at least the number of paid restarts of the job in the rolling form.

    Row 0: rise in slot 0 >= level now - level before; row i: rise in the i-th later slot >=
    its level - the level of the slot before it. A level is run-hours / slot length. ``slots``: the
    job's later slots whose rises count (a prefix of them: the rest of its run-hours are not coupled).
    """
    count = slots.size
    rises = model.add(np.zeros(1 + count), 0.0, np.inf)  # slot 0, then each later slot
    rows, cols, vals = [np.arange(1 + count)], [rises], [np.ones(1 + count)]
    for y in vars_.now_cols:
        rows.append(np.array([0, 1][: 1 + min(count, 1)]))
        cols.append(np.full(1 + min(count, 1), y))
        vals.append(np.array([-1.0, 1.0][: 1 + min(count, 1)]))
    inverse = 1.0 / grid.lengths[slots]
    for x in (c[:count] for c in vars_.run_cols):
        rows += [np.arange(1, count + 1), np.arange(2, count + 1)]
        cols += [x, x[:-1]]
        vals += [-inverse, inverse[:-1]]
    before = 1.0 if st.running is not None else 0.0
    model.rows(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
               lb=np.r_[-before, np.zeros(count)], ub=np.inf)
    paid = model.add(np.zeros(1), 0.0, np.inf)
    free_first = 0.0 if st.started or st.running is not None else 1.0  # a job's first start costs nothing
    model.row(np.concatenate([paid, rises]), np.r_[1.0, -np.ones(rises.size)], lb=-free_first)
    if not free_first:
        # A started job that does not run now must start again to finish: that restart is whole, however
        # little of a later slot it runs (on the level alone the LP would pay a sliver of it, pause jobs
        # for nothing and put a short remainder off for ever).
        model.row([int(paid[0]), *vars_.now_cols], 1.0, lb=1.0)
    return paid


def _limits(windows: list[JobWindow], grid: SlotGrid, capacity: dict[str, int], free_now: dict[str, int], *,
            gpu_hours: bool) -> dict[tuple[str, int], float]:
    limits: dict[tuple[str, int], float] = {}
    forced: dict[str, int] = {}
    for w in windows:
        st = w.status
        if st.running is not None and not st.can_pause:
            forced[st.part(st.running)] = forced.get(st.part(st.running), 0) + st.options[st.running].gpus
    for part, gpus in capacity.items():
        # Jobs that cannot be stopped keep their GPUs even if the partition shrank under them.
        limits[(part, 0)] = float(max(free_now.get(part, gpus), forced.get(part, 0)))
        for k in range(1, grid.count):
            limits[(part, k)] = gpus * (grid.lengths[k] if gpu_hours else 1.0)
    return limits


def build_exact(model: LinearModel, windows: list[JobWindow], grid: SlotGrid, *, resume_overhead_h: float,
                scale_g: float, capacity: dict[str, int], free_now: dict[str, int]) -> list[JobVars]:
    """Add the exact form (binary per job, width and slot) to ``model``; return each job's variables.

    Jobs of one partition each (the planner uses the rolling form when a job may move)."""
    caps = CapacityRows()
    out = []
    for w in windows:
        vars_ = JobVars(w)
        st = w.status
        run_h = grid.overlap(w.end_h)
        count = max(1, grid.slots_before(w.end_h))
        slots = np.arange(count)
        length = run_h[:count]
        starts = model.add(np.zeros(count), 0.0, np.inf)  # u: a (re)start in this slot
        later = model.add(np.zeros(count), 0.0, np.r_[np.ones(count - 1), 0.0])  # a: runs in a later slot
        actives: list[np.ndarray] = []
        work_cols, work_vals = [starts], [np.full(count, -resume_overhead_h)]
        for o, opt in enumerate(st.options):
            forced = st.running == o and not st.can_pause
            lb = np.zeros(count)
            lb[0] = 1.0 if forced else 0.0
            y = model.add(np.zeros(count), lb, 1.0, integral=True)
            cost = (opt.power_kw * w.intensity[o][slots] / scale_g + _EARLY * slots
                    + w.late_cost(grid.edges[slots + 1]))
            x = model.add(cost, 0.0, length)
            for k in slots:
                model.row([int(x[k]), int(y[k])], [1.0, -float(length[k])], ub=0.0)  # runs only when active
                previous = (1.0 if st.running == o else 0.0) if k == 0 else None
                if previous is None:
                    model.row([int(starts[k]), int(y[k]), int(y[k - 1])], [1.0, -1.0, 1.0], lb=0.0)
                else:
                    model.row([int(starts[k]), int(y[k])], [1.0, -1.0], lb=-previous)
            actives.append(y)
            vars_.active_cols.append(y)
            vars_.now_cols.append(int(y[0]))
            vars_.run_cols.append(x)
            vars_.run_slots.append(slots)
            work_cols.append(x)
            work_vals.append(np.full(count, opt.speed))
            caps.add(st.part(o), slots, y, opt.gpus)
        for k in slots:
            ys = [int(y[k]) for y in actives]
            xs = [int(c[k]) for c in vars_.run_cols]
            if len(ys) > 1:
                model.row(ys, 1.0, ub=1.0)
            if k + 1 < count:
                model.row([int(later[k])] + [int(y[k + 1]) for y in actives], [1.0] + [-1.0] * len(ys), lb=0.0)
                model.row([int(later[k]), int(later[k + 1])], [1.0, -1.0], lb=0.0)
            # Active now and later: this slot is run whole (a job stops mid-slot only when it finishes).
            model.row(xs + ys + [int(later[k])], [1.0] * len(xs) + [-float(length[k])] * (len(ys) + 1),
                      lb=-float(length[k]))
        first_start_free = 0.0 if st.started or st.running is not None else resume_overhead_h
        model.row(np.concatenate(work_cols), np.concatenate(work_vals),
                  lb=st.remaining_h + st.overhead_left_h - first_start_free)
        out.append(vars_)
    caps.emit(model, _limits(windows, grid, capacity, free_now, gpu_hours=False))
    return out
