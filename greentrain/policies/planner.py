"""Minimum-emission schedule over time slots by dynamic programming.

The job needs ``work_s`` seconds of running at full speed before the last slot
ends. In each slot it either pauses or runs at one operating point ("mode":
speed relative to full speed, power draw). Running right after a pause first
pays ``overhead_s`` (restore from checkpoint) at full power without progress;
the very first start is free. A pause after the first start is not free: the
held hardware draws ``waiting_power_w`` for the whole slot (0 when the job
releases it); waiting before the first start costs nothing. The job finishes
part-way through its last slot and only that part is charged. Expected
emissions = (running + waiting + resume) energy × the slot's intensity, summed.

Remaining work is counted in bins of ``quantum_s``; progress per slot is
rounded *down* to whole bins, so a plan that looks feasible really is. The
DP runs backward over slots with value arrays indexed by remaining bins, one
per start state (fresh / running / paused), vectorised over modes with numpy:
72 hourly slots × ~10 modes × ~2000 bins takes a few milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import IntEnum

import numpy as np

from greentrain.units import J_PER_KWH  # re-exported: the planner's energy-to-emissions conversion

__all__ = ["J_PER_KWH", "Mode", "Plan", "Slot", "StartState", "bin_size_s", "plan_schedule", "running_intervals"]

_TIE_BREAK = 1e-9  # later slots cost a hair more, so equal-cost plans run early


@dataclass(frozen=True, slots=True)
class Mode:
    """One way of running: progress per wall second (1.0 = full speed) and draw."""

    speed: float
    power_w: float
    power_limit_w: float | None = None
    sm_clocks_mhz: tuple[int, int] | None = None
    replicas: int | None = None
    """Carbon scaling: the replica count this mode runs at (None = not an elastic job)."""


@dataclass(frozen=True, slots=True)
class Slot:
    """An interval of known (or forecast) constant carbon intensity."""

    start: datetime
    end: datetime
    intensity_g_per_kwh: float

    @property
    def duration_s(self) -> float:
        return (self.end - self.start).total_seconds()


class StartState(IntEnum):
    """Job state before the first slot: decides whether running first costs a resume."""

    FRESH = 0  # never started: the first start is free
    RUNNING = 1
    PAUSED = 2  # started, then paused: the next run pays the resume overhead


@dataclass(frozen=True, slots=True)
class Plan:
    """The chosen mode per slot (None = pause) and what it is expected to cost."""

    slots: tuple[Slot, ...]
    modes: tuple[Mode | None, ...]
    run_s: tuple[float, ...]
    """Seconds spent running (overhead included) in each slot."""
    emissions_g: float
    """Expected emissions of running, resuming and waiting (net)."""
    energy_j: float
    finish: datetime
    waiting_j: float = 0.0
    """Of ``energy_j``: drawn while paused after the first start."""
    pause_saving_g: float = 0.0
    """Expected emissions saved by pausing in the first slot instead of running in it (> 0 when the plan
    pauses there; < 0, what a pause would add, when it runs); policies compare it with their margin."""
    first_run_mode: Mode | None = None
    """The best mode to run at in the first slot, had the plan to run there."""

    def running_intervals(self) -> tuple[tuple[datetime, datetime], ...]:
        """Merged [start, end) intervals in which the job runs."""
        return running_intervals(self.slots, self.run_s)


def running_intervals(slots: Sequence[Slot], run_s: Sequence[float]) -> tuple[tuple[datetime, datetime], ...]:
    """Merged [start, end) intervals of running: ``run_s[i]`` seconds from the start of ``slots[i]``."""
    merged: list[tuple[datetime, datetime]] = []
    for slot, seconds in zip(slots, run_s):
        if seconds <= 0:
            continue
        end = slot.start + timedelta(seconds=seconds)
        if merged and merged[-1][1] == slot.start:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((slot.start, end))
    return tuple(merged)


def bin_size_s(work_s: float, max_bins: int) -> float:
    """Bin size: a whole fraction of a minute (keeps hourly slots and minute overheads exact)."""
    per_minute = math.floor(60.0 * max_bins / work_s)
    if per_minute >= 1:
        return 60.0 / min(per_minute, 60)
    return work_s / max_bins


def _slot_tables(
    length_s: float, overhead_s: float, modes: Sequence[Mode], overhead_power_w: float,
    quantum_s: float, n: int,
) -> tuple[np.ndarray, np.ndarray]:
    """For one slot length: joules C and gather index G, shape (2K, N+1).

    Rows 0..K-1 run without a resume, rows K..2K-1 after one. Running at a mode
    from i remaining bins costs ``g_per_j * C + V_running[G]``: when the job
    finishes in the slot G = 0 (V[0] = 0) and C is the part-slot energy,
    otherwise C is the whole slot and G = i - progress.
    """
    k_count = len(modes)
    joules = np.empty((2 * k_count, n + 1))
    gather = np.zeros((2 * k_count, n + 1), dtype=np.intp)
    bins = np.arange(n + 1)
    for variant, over_s in enumerate((0.0, min(overhead_s, length_s))):
        avail_s = length_s - over_s
        for k, mode in enumerate(modes):
            row = variant * k_count + k
            progress = math.floor(mode.speed * avail_s / quantum_s + 1e-9) if mode.speed > 0 else 0
            fixed_j = overhead_power_w * over_s
            done = bins <= progress
            part_j = fixed_j + mode.power_w * bins * quantum_s / max(mode.speed, 1e-12)
            joules[row] = np.where(done, part_j, fixed_j + mode.power_w * avail_s)
            gather[row] = np.where(done, 0, bins - progress)
    return joules, gather


def plan_schedule(
    slots: Sequence[Slot],
    work_s: float,
    modes: Sequence[Mode],
    *,
    overhead_s: float = 0.0,
    overhead_power_w: float | None = None,
    state: StartState = StartState.FRESH,
    max_bins: int = 2000,
    memo: dict | None = None,
    waiting_power_w: float = 0.0,
    pessimism: float = 1.0,
) -> Plan | None:
    """The minimum-emission plan finishing ``work_s`` within ``slots``; None if impossible.

    ``pessimism`` (>= 1) keeps the plan inside a deadline envelope: at the start of every slot, the work
    still left, run flat out at ``pessimism`` times its expected time (a resume first when paused), must
    still fit before the last slot ends. So a plan made with the expected rate also finishes at the
    pessimistic one: it may wait only while the slower rate would still make it.

    ``modes`` must be non-empty; ties prefer earlier running and the first
    (list it fastest first) mode. ``overhead_power_w`` defaults to the power of
    the fastest mode. ``waiting_power_w`` is the draw while paused after the
    first start (held devices idle; 0 = released). ``memo`` (a dict the caller keeps) caches the backward
    pass over all but the first slot, so repeated calls within one interval
    cost little; results are identical with or without it.
    """
    if not modes:
        raise ValueError("plan_schedule: at least one mode is required")
    if overhead_power_w is None:
        overhead_power_w = max(modes, key=lambda m: m.speed).power_w
    if work_s <= 0 or not slots:
        return None if work_s > 0 else Plan(tuple(slots), (None,) * len(slots), (0.0,) * len(slots), 0.0, 0.0,
                                            slots[0].start if slots else datetime.max)
    quantum_s = bin_size_s(work_s, max_bins)
    n = max_bins if memo is not None else math.ceil(work_s / quantum_s - 1e-9)
    if not waiting_power_w >= 0:
        raise ValueError(f"plan_schedule: waiting_power_w must be >= 0, got {waiting_power_w}")
    if not 1.0 <= pessimism < math.inf:
        raise ValueError(f"plan_schedule: pessimism must be >= 1, got {pessimism}")
    envelope = _envelope(slots, quantum_s / max(m.speed for m in modes) * pessimism, overhead_s, n)
    args = (modes, overhead_s, overhead_power_w, waiting_power_w, envelope)
    if memo is None:
        tables = _PlanTables(quantum_s, {}, _terminal(len(slots), n))
        _fill(tables, slots, *args, low=0)
    else:
        tables = _with_cached_tail(memo, slots, n, quantum_s, args)
    if not np.isfinite(tables.values[0][state, min(n, math.ceil(work_s / quantum_s - 1e-9))]):
        return None
    return _forward(slots, work_s, modes, overhead_s, overhead_power_w, waiting_power_w, state, tables)


def _envelope(slots: Sequence[Slot], bin_s: float, overhead_s: float, n: int) -> tuple[tuple[int, ...], ...] | None:
    """Per slot and start state, the most bins that may remain at its start (None: no envelope beyond the
    DP's own feasibility, the usual case of ``pessimism`` 1)."""
    end = slots[-1].end
    caps = []
    for slot in slots:
        left_s = (end - slot.start).total_seconds()
        per_state = (left_s, left_s, left_s - overhead_s)  # FRESH, RUNNING, PAUSED (a resume first)
        caps.append(tuple(min(n, max(-1, math.floor(s / bin_s + 1e-9))) for s in per_state))
    if all(cap >= n for row in caps for cap in row):
        return None
    return tuple(caps)


def _terminal(count: int, n: int) -> list[np.ndarray]:
    value = np.full((3, n + 1), np.inf)
    value[:, 0] = 0.0
    return [value] * (count + 1)


def _with_cached_tail(memo: dict, slots: Sequence[Slot], n: int, quantum_s: float, args: tuple) -> _PlanTables:
    """Reuse the backward pass over slots[1:] between calls within one interval (the engine
    decides at every step; only the current, shrinking slot and the remaining work change)."""
    envelope = args[-1]
    key = (tuple(slots[1:]), tuple(args[0]), *args[1:-1], envelope and envelope[1:], quantum_s, n)
    tail = memo.get(key)
    if tail is None:
        tail = _PlanTables(quantum_s, {}, _terminal(len(slots), n))
        _fill(tail, slots, *args, low=1)
        if len(memo) >= 4:
            memo.pop(next(iter(memo)))
        memo[key] = tail
    tables = _PlanTables(quantum_s, dict(tail.by_length), list(tail.values))
    _fill(tables, slots, *args, low=0, high=1)
    return tables


_RUN_ROWS = np.array([0, 0, 1])  # FRESH and RUNNING run without a resume, PAUSED after one
_PAUSE_NEXT = np.array([StartState.FRESH, StartState.PAUSED, StartState.PAUSED])
_WAITS = np.array([0.0, 1.0, 1.0])[:, None]  # a pause before the first start draws nothing


@dataclass(slots=True)
class _PlanTables:
    quantum_s: float
    by_length: dict[float, tuple[np.ndarray, np.ndarray]]
    values: list[np.ndarray]
    """values[t][state, bins]: least emissions from slot t on; values[len(slots)] is terminal."""


def _fill(
    tables: _PlanTables, slots: Sequence[Slot], modes: Sequence[Mode], overhead_s: float,
    overhead_power_w: float, waiting_power_w: float, envelope: tuple[tuple[int, ...], ...] | None, *,
    low: int, high: int | None = None,
) -> None:
    """Fill ``tables.values[t]`` for t = high-1 down to low from ``values[high]`` (choices are
    recovered going forward)."""
    high = len(slots) if high is None else high
    k_count = len(modes)
    value = tables.values[high]
    n = value.shape[1] - 1
    for t in range(high - 1, low - 1, -1):
        slot = slots[t]
        length_s = slot.duration_s
        if length_s not in tables.by_length:
            tables.by_length[length_s] = _slot_tables(length_s, overhead_s, modes, overhead_power_w,
                                                      tables.quantum_s, n)
        joules, gather = tables.by_length[length_s]
        g_per_j = _g_per_j(slot, t)
        run = joules * g_per_j + value[StartState.RUNNING][gather]
        best = run.reshape(2, k_count, n + 1).min(axis=1)
        value = np.minimum(value[_PAUSE_NEXT] + _WAITS * (waiting_power_w * length_s * g_per_j), best[_RUN_ROWS])
        value[:, 0] = 0.0
        if envelope is not None:
            for state, cap in enumerate(envelope[t]):
                value[state, cap + 1:] = np.inf
        tables.values[t] = value


def _g_per_j(slot: Slot, t: int) -> float:
    return slot.intensity_g_per_kwh * (1.0 + _TIE_BREAK * t) / J_PER_KWH


def _choose(tables: _PlanTables, slots: Sequence[Slot], t: int, state: StartState, index: int, k_count: int,
            waiting_power_w: float) -> tuple[int, int, float]:
    """The backward pass's choice at (t, state, index): mode row, or -1 to pause; run wins ties.
    Also the best run row and the expected saving of pausing over it (> 0 only when it pauses)."""
    joules, gather = tables.by_length[slots[t].duration_s]
    after = tables.values[t + 1]
    offset = k_count if state == StartState.PAUSED else 0
    g_per_j = _g_per_j(slots[t], t)
    rows = range(offset, offset + k_count)
    costs = [joules[r, index] * g_per_j + after[StartState.RUNNING, gather[r, index]] for r in rows]
    best = min(range(k_count), key=lambda k: costs[k])
    waiting_g = waiting_power_w * slots[t].duration_s * g_per_j if state != StartState.FRESH else 0.0
    pause_g = after[_PAUSE_NEXT[state], index] + waiting_g
    saving_g = float(costs[best] - pause_g) if np.isfinite(costs[best]) else math.inf
    if pause_g < costs[best]:
        return -1, best, saving_g
    return best, best, saving_g


def _forward(
    slots: Sequence[Slot], work_s: float, modes: Sequence[Mode], overhead_s: float,
    overhead_power_w: float, waiting_power_w: float, state: StartState, tables: _PlanTables,
) -> Plan:
    """Follow the choices from the start, tracking exact (unrounded) remaining work."""
    n = tables.values[0].shape[1] - 1
    remaining_s = work_s
    chosen: list[Mode | None] = []
    run_list: list[float] = []
    emissions_g = energy_j = waiting_j = pause_saving_g = 0.0
    first_run: Mode | None = None
    finish = slots[-1].end
    for t, slot in enumerate(slots):
        if remaining_s <= 1e-9:
            chosen.append(None)
            run_list.append(0.0)
            continue
        # Real progress is never below the rounded-down plan, so this index is never above it.
        index = min(math.ceil(remaining_s / tables.quantum_s - 1e-9), n)
        k, best, saving_g = _choose(tables, slots, t, state, index, len(modes), waiting_power_w)
        if t == 0:
            first_run, pause_saving_g = modes[best], saving_g
        if k < 0:
            chosen.append(None)
            run_list.append(0.0)
            if state != StartState.FRESH:
                wait_j = waiting_power_w * slot.duration_s
                waiting_j += wait_j
                energy_j += wait_j
                emissions_g += wait_j * slot.intensity_g_per_kwh / J_PER_KWH
                state = StartState.PAUSED
            continue
        mode = modes[k]
        over_s = min(overhead_s, slot.duration_s) if state == StartState.PAUSED else 0.0
        need_s = remaining_s / mode.speed if mode.speed > 0 else math.inf
        run_s = min(slot.duration_s, over_s + need_s)
        slot_j = overhead_power_w * over_s + mode.power_w * (run_s - over_s)
        remaining_s -= mode.speed * (run_s - over_s)
        energy_j += slot_j
        emissions_g += slot_j * slot.intensity_g_per_kwh / J_PER_KWH
        chosen.append(mode)
        run_list.append(run_s)
        state = StartState.RUNNING
        if remaining_s <= 1e-9:
            finish = slot.start + timedelta(seconds=run_s)
    return Plan(tuple(slots), tuple(chosen), tuple(run_list), emissions_g, energy_j, finish, waiting_j,
                pause_saving_g, first_run)
