"""The minimum-emission plan over time slots, by one backward dynamic program: when to run, how hard,
and (for an elastic job) at how many replicas.

The job needs ``work_s`` seconds of running at full speed before the last slot ends. In each slot it
pauses or runs at one operating point (a ``Mode``: speed relative to full speed, and draw). Modes that
share a replica count (``Mode.replicas``; None for a job that is not elastic) form one group: moving
between them is free (a power limit or clock change), while running after a pause, or at another replica
count, first pays ``overhead_s`` without progress (restore from checkpoint; relaunch and reshard). The
very first start is free. A pause after the first start draws ``waiting_power_w`` for the whole slot (0
when the job releases its hardware); waiting before the first start costs nothing. The job finishes
part-way through its last slot and only that part is charged. Expected emissions = (running + waiting +
restart) energy × the slot's intensity, summed.

Remaining work is counted in bins; progress per slot is rounded *down* to whole bins, so a plan that looks
feasible really is. The state is (slot, start state, remaining bins), the start state being "fresh",
"paused" or "running in group g"; values are numpy arrays over bins, so one slot costs O(modes × bins):
72 hourly slots × ~10 modes × ~2000 bins take a few milliseconds.

``plan_schedule`` is the timing form (start states ``StartState``); ``plan_scaling`` the replica form
(start states ``FRESH``, ``PAUSED`` or ``running_state(i)``), where each count restarts at its own draw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from greentrain.policies.plan_types import Mode, Plan, Slot, StartState, running_intervals
from greentrain.units import J_PER_KWH  # re-exported: the planner's energy-to-emissions conversion

__all__ = ["FRESH", "J_PER_KWH", "Mode", "PAUSED", "Plan", "Slot", "StartState", "bin_size_s", "plan_scaling",
           "plan_schedule", "running_intervals", "running_state"]

_TIE_BREAK = 1e-9  # later slots cost a hair more, so equal-cost plans run early


FRESH = -2
"""Replica form's start state: never started (the first start is free)."""
PAUSED = -1
"""Replica form's start state: started, now paused (any run pays the overhead; the pause draws)."""


def running_state(index: int) -> int:
    """Replica form's start state: running at ``options[index]`` (staying is free, a change restarts)."""
    return index


def bin_size_s(work_s: float, max_bins: int) -> float:
    """Bin size: a whole fraction of a minute (keeps hourly slots and minute overheads exact)."""
    per_minute = math.floor(60.0 * max_bins / work_s)
    if per_minute >= 1:
        return 60.0 / min(per_minute, 60)
    return work_s / max_bins


def plan_schedule(
    slots: Sequence[Slot],
    work_s: float,
    modes: Sequence[Mode],
    *,
    overhead_s: float = 0.0,
    overhead_power_w: float | None = None,
    state: StartState = StartState.FRESH,
    max_bins: int = 2000,
    memo: dict[tuple[object, ...], _Tables] | None = None,
    waiting_power_w: float = 0.0,
    pessimism: float = 1.0,
) -> Plan | None:
    """The minimum-emission plan finishing ``work_s`` within ``slots``; None if impossible.

    ``pessimism`` (>= 1) keeps the plan inside a deadline envelope: at the start of every slot, the work
    still left, run flat out at ``pessimism`` times its expected time (a resume first when paused), must
    still fit before the last slot ends. So a plan made with the expected rate also finishes at the
    pessimistic one: it may wait only while the slower rate would still make it.

    ``modes`` must be non-empty; ties prefer earlier running and the first (list it fastest first) mode.
    ``overhead_power_w`` (the draw while restoring) defaults to the power of the fastest mode.
    ``waiting_power_w`` is the draw while paused after the first start (held devices idle; 0 = released).
    ``memo`` (a dict the caller keeps) caches the backward pass over all but the first slot, so repeated
    calls within one interval cost little; results are identical with or without it.
    """
    if not modes:
        raise ValueError("plan_schedule: at least one mode is required")
    if overhead_power_w is None:
        overhead_power_w = max(modes, key=lambda m: m.speed).power_w
    if not 1.0 <= pessimism < math.inf:
        raise ValueError(f"plan_schedule: pessimism must be >= 1, got {pessimism}")
    problem = _Problem(modes, overhead_s, (overhead_power_w,) * len(modes), waiting_power_w, "plan_schedule")
    if state == StartState.RUNNING:
        # A job running at a mode this list leaves out still runs on without a restart (one group).
        row = problem.group_row(problem.groups[0]) if len(set(problem.groups)) == 1 else problem.paused_row
    else:
        row = problem.fresh_row if state == StartState.FRESH else problem.paused_row
    return _plan(problem, slots, work_s, row, max_bins, memo, pessimism)


def plan_scaling(
    slots: Sequence[Slot],
    work_s: float,
    options: Sequence[Mode],
    *,
    overhead_s: float = 0.0,
    state: int = FRESH,
    waiting_power_w: float = 0.0,
    max_bins: int = 2000,
) -> Plan | None:
    """The minimum-emission replica plan finishing ``work_s`` within ``slots``; None if impossible: the
    same program, each count its own group, a restart drawing the new count's power.

    ``options`` are the allowed counts as modes (``Mode.replicas`` set, speed > 0, power > 0); ``state`` is
    ``FRESH``, ``PAUSED`` or ``running_state(i)`` for ``options[i]``. Ties prefer running early, and the
    earlier option in the list.
    """
    if not options or any(m.speed <= 0 or m.power_w <= 0 for m in options):
        raise ValueError("plan_scaling: need at least one option, each with speed > 0 and power > 0")
    if not (state in (FRESH, PAUSED) or 0 <= state < len(options)):
        raise ValueError(f"plan_scaling: state {state} is not FRESH, PAUSED or an option index")
    problem = _Problem(options, overhead_s, tuple(m.power_w for m in options), waiting_power_w, "plan_scaling")
    row = {FRESH: problem.fresh_row, PAUSED: problem.paused_row}.get(state)
    if row is None:
        row = problem.group_row(problem.groups[state])
    return _plan(problem, slots, work_s, row, max_bins, None, 1.0)


@dataclass(frozen=True)
class _Problem:
    """The modes and what restarts cost. Value rows: one per group (running in it), then paused, fresh."""

    modes: Sequence[Mode]
    overhead_s: float
    restart_power_w: tuple[float, ...]
    waiting_power_w: float
    caller: str
    groups: tuple[int, ...] = ()
    """Group index of each mode."""

    def __post_init__(self) -> None:
        if not self.waiting_power_w >= 0:
            raise ValueError(f"{self.caller}: waiting_power_w must be >= 0, got {self.waiting_power_w}")
        keys: dict[int | None, int] = {}
        object.__setattr__(self, "groups", tuple(keys.setdefault(m.replicas, len(keys)) for m in self.modes))

    @property
    def group_count(self) -> int:
        return max(self.groups) + 1

    def group_row(self, group: int) -> int:
        return group

    @property
    def paused_row(self) -> int:
        return self.group_count

    @property
    def fresh_row(self) -> int:
        return self.group_count + 1

    def key(self) -> tuple[object, ...]:
        return (tuple(self.modes), self.overhead_s, self.restart_power_w, self.waiting_power_w)


@dataclass(slots=True)
class _Tables:
    quantum_s: float
    n: int
    by_length: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]]
    """Per slot length: joules, the remaining-bin index after the slot, and that index into the running
    rows of a values array, raveled."""
    values: list[np.ndarray]
    """values[t][row, bins]: least emissions from slot t on; values[len(slots)] is terminal."""


def _plan(problem: _Problem, slots: Sequence[Slot], work_s: float, row: int, max_bins: int,
          memo: dict[tuple[object, ...], _Tables] | None, pessimism: float) -> Plan | None:
    if work_s <= 0 or not slots:
        if work_s > 0:
            return None
        return Plan(tuple(slots), (None,) * len(slots), (0.0,) * len(slots), 0.0, 0.0,
                    slots[0].start if slots else datetime.max)
    quantum_s = bin_size_s(work_s, max_bins)
    n = max_bins if memo is not None else math.ceil(work_s / quantum_s - 1e-9)
    envelope = _envelope(slots, quantum_s / max(m.speed for m in problem.modes) * pessimism, problem.overhead_s, n)
    if memo is None:
        tables = _Tables(quantum_s, n, {}, _terminal(problem, len(slots), n))
        _fill(problem, tables, slots, envelope, low=0)
    else:
        tables = _with_cached_tail(problem, memo, slots, n, quantum_s, envelope)
    if not np.isfinite(tables.values[0][row, min(n, math.ceil(work_s / quantum_s - 1e-9))]):
        return None
    return _forward(problem, tables, slots, work_s, row)


def _envelope(slots: Sequence[Slot], bin_s: float, overhead_s: float, n: int) -> tuple[tuple[int, ...], ...] | None:
    """Per slot, the most bins that may remain at its start when running, paused (a resume first) and
    fresh (None: no envelope beyond the DP's own feasibility, the usual case of ``pessimism`` 1)."""
    end = slots[-1].end
    caps = []
    for slot in slots:
        left_s = (end - slot.start).total_seconds()
        caps.append(tuple(min(n, max(-1, math.floor(s / bin_s + 1e-9))) for s in (left_s, left_s - overhead_s, left_s)))
    if all(cap >= n for caps_of_slot in caps for cap in caps_of_slot):
        return None
    return tuple(caps)


def _terminal(problem: _Problem, count: int, n: int) -> list[np.ndarray]:
    value = np.full((problem.group_count + 2, n + 1), np.inf)
    value[:, 0] = 0.0
    return [value] * (count + 1)


def _with_cached_tail(problem: _Problem, memo: dict[tuple[object, ...], _Tables], slots: Sequence[Slot], n: int,
                      quantum_s: float, envelope: tuple[tuple[int, ...], ...] | None) -> _Tables:
    """Reuse the backward pass over slots[1:] between calls within one interval (the engine decides at every
    step; only the current, shrinking slot and the remaining work change)."""
    key = (tuple(slots[1:]), problem.key(), envelope and envelope[1:], quantum_s, n)
    tail = memo.get(key)
    if tail is None:
        tail = _Tables(quantum_s, n, {}, _terminal(problem, len(slots), n))
        _fill(problem, tail, slots, envelope, low=1)
        if len(memo) >= 4:
            memo.pop(next(iter(memo)))
        memo[key] = tail
    tables = _Tables(quantum_s, n, dict(tail.by_length), list(tail.values))
    _fill(problem, tables, slots, envelope, low=0, high=1)
    return tables


def _slot_tables(problem: _Problem, length_s: float, quantum_s: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For one slot length: joules and the remaining-bin index after the slot, shape (2, K, N+1): [0] runs
    without a restart, [1] after one. When the job finishes in the slot the index is 0 (value 0) and the
    joules are the part-slot energy; otherwise the whole slot's, and the index is bins - progress."""
    k_count = len(problem.modes)
    joules = np.empty((2, k_count, n + 1))
    gather = np.zeros((2, k_count, n + 1), dtype=np.intp)
    bins = np.arange(n + 1)
    for variant, over_s in enumerate((0.0, min(problem.overhead_s, length_s))):
        avail_s = length_s - over_s
        for k, mode in enumerate(problem.modes):
            progress = math.floor(mode.speed * avail_s / quantum_s + 1e-9) if mode.speed > 0 else 0
            fixed_j = problem.restart_power_w[k] * over_s
            done = bins <= progress
            part_j = fixed_j + mode.power_w * bins * quantum_s / max(mode.speed, 1e-12)
            joules[variant, k] = np.where(done, part_j, fixed_j + mode.power_w * avail_s)
            gather[variant, k] = np.where(done, 0, bins - progress)
    return joules, gather


def _g_per_j(slot: Slot, t: int) -> float:
    return slot.intensity_g_per_kwh * (1.0 + _TIE_BREAK * t) / J_PER_KWH


def _run_costs(problem: _Problem, tables: _Tables, slot: Slot, t: int, after: np.ndarray) -> np.ndarray:
    """Emissions of running each mode in slot t and optimally after, shape (2, K, N+1) (no restart / one)."""
    if slot.duration_s not in tables.by_length:
        joules, gather = _slot_tables(problem, slot.duration_s, tables.quantum_s, tables.n)
        rows = np.asarray(problem.groups)[None, :, None] * (tables.n + 1)
        tables.by_length[slot.duration_s] = (joules, gather, rows + gather)
    joules, gather, flat = tables.by_length[slot.duration_s]
    if problem.group_count == 1:
        return joules * _g_per_j(slot, t) + after[0][gather]
    return joules * _g_per_j(slot, t) + after[:problem.group_count].ravel().take(flat)


def _by_group(problem: _Problem, costs: np.ndarray) -> np.ndarray:
    """The least of ``costs`` (K, N+1) within each group: (G, N+1)."""
    if problem.group_count == len(problem.groups):  # one mode a group (replica counts): groups are 0..K-1
        return costs
    if problem.group_count == 1:
        return costs.min(axis=0, keepdims=True)
    groups = np.asarray(problem.groups)
    return np.stack([costs[groups == g].min(axis=0) for g in range(problem.group_count)])


def _fill(problem: _Problem, tables: _Tables, slots: Sequence[Slot], envelope: tuple[tuple[int, ...], ...] | None,
          *, low: int, high: int | None = None) -> None:
    """Fill ``tables.values[t]`` for t = high-1 down to low from ``values[high]`` (choices are recovered
    going forward)."""
    high = len(slots) if high is None else high
    g_count = problem.group_count
    after = tables.values[high]
    columns, group_col = np.arange(after.shape[1]), np.arange(g_count)[:, None]
    for t in range(high - 1, low - 1, -1):
        slot = slots[t]
        stay, restart = _run_costs(problem, tables, slot, t, after)
        wait = after[g_count] + problem.waiting_power_w * slot.duration_s * _g_per_j(slot, t)
        restart_in = _by_group(problem, restart)
        value = np.empty_like(after)
        # Running in group g: stay in g for free, restart into the best other group, or pause.
        stay_in = _by_group(problem, stay)
        stay_best = stay_in[0] if g_count == 1 else stay.min(axis=0)
        running = np.minimum(stay_in, wait[None, :])
        if g_count > 1:
            first = restart_in.argmin(axis=0)
            masked = restart_in.copy()
            masked[first, columns] = np.inf
            other = np.where(first[None, :] == group_col, masked.min(axis=0)[None, :],
                             restart_in[first, columns][None, :])
            running = np.minimum(running, other)
        value[:g_count] = running
        value[g_count] = np.minimum(wait, restart_in[0] if g_count == 1 else restart_in.min(axis=0))
        value[g_count + 1] = np.minimum(after[g_count + 1], stay_best)
        value[:, 0] = 0.0
        if envelope is not None:
            running_cap, paused_cap, fresh_cap = envelope[t]
            value[:g_count, running_cap + 1:] = np.inf
            value[g_count, paused_cap + 1:] = np.inf
            value[g_count + 1, fresh_cap + 1:] = np.inf
        tables.values[t] = value
        after = value


def _choice_costs(problem: _Problem, tables: _Tables, slots: Sequence[Slot], t: int, row: int,
                  index: int) -> list[float]:
    """Cost of each choice at (t, row, index): modes 0..K-1, then pause (index K)."""
    slot, after = slots[t], tables.values[t + 1]
    joules, gather, _ = tables.by_length[slot.duration_s]
    g_per_j = _g_per_j(slot, t)
    costs = []
    for k, group in enumerate(problem.groups):
        variant = 0 if row in (problem.fresh_row, group) else 1
        costs.append(float(joules[variant, k, index] * g_per_j + after[group, gather[variant, k, index]]))
    fresh = row == problem.fresh_row
    waiting_g = 0.0 if fresh else problem.waiting_power_w * slot.duration_s * g_per_j
    costs.append(float(after[problem.fresh_row if fresh else problem.paused_row, index] + waiting_g))
    return costs


def _forward(problem: _Problem, tables: _Tables, slots: Sequence[Slot], work_s: float, row: int) -> Plan:
    """Follow the choices from the start, tracking exact (unrounded) remaining work."""
    modes, k_count = problem.modes, len(problem.modes)
    remaining_s = work_s
    chosen: list[Mode | None] = []
    run_list: list[float] = []
    emissions_g = energy_j = waiting_j = pause_saving_g = 0.0
    changes = 0
    first_run: Mode | None = None
    first_costs: dict[int, float] = {}
    finish = slots[-1].end
    for t, slot in enumerate(slots):
        if remaining_s <= 1e-9:
            chosen.append(None)
            run_list.append(0.0)
            continue
        # Real progress is never below the rounded-down plan, so this index is never above it.
        index = min(math.ceil(remaining_s / tables.quantum_s - 1e-9), tables.n)
        costs = _choice_costs(problem, tables, slots, t, row, index)
        best = min(range(k_count), key=lambda i: (costs[i], i))
        if t == 0:
            first_run = modes[best]
            pause_saving_g = costs[best] - costs[k_count] if math.isfinite(costs[best]) else math.inf
            for mode, cost in zip(modes, costs):
                count = int(mode.replicas or 0)
                first_costs[count] = min(first_costs.get(count, math.inf), cost)
            first_costs[0] = costs[k_count]
        if costs[k_count] < costs[best]:  # runs win ties
            chosen.append(None)
            run_list.append(0.0)
            if row != problem.fresh_row:
                wait_j = problem.waiting_power_w * slot.duration_s
                waiting_j += wait_j
                energy_j += wait_j
                emissions_g += wait_j * slot.intensity_g_per_kwh / J_PER_KWH
                row = problem.paused_row
            continue
        mode, group = modes[best], problem.groups[best]
        restart = row not in (problem.fresh_row, group)
        over_s = min(problem.overhead_s, slot.duration_s) if restart else 0.0
        changes += restart
        need_s = remaining_s / mode.speed if mode.speed > 0 else math.inf
        run_s = min(slot.duration_s, over_s + need_s)
        slot_j = problem.restart_power_w[best] * over_s + mode.power_w * (run_s - over_s)
        remaining_s -= mode.speed * (run_s - over_s)
        energy_j += slot_j
        emissions_g += slot_j * slot.intensity_g_per_kwh / J_PER_KWH
        chosen.append(mode)
        run_list.append(run_s)
        row = group
        if remaining_s <= 1e-9:
            finish = slot.start + timedelta(seconds=run_s)
    return Plan(tuple(slots), tuple(chosen), tuple(run_list), emissions_g, energy_j, finish, waiting_j,
                pause_saving_g, first_run, changes, first_costs)
