"""Minimum-emission replica count per time slot, restarts included, by dynamic programming.

An elastic data-parallel job runs at one replica count per slot (or pauses:
0 replicas). Each count is an option with its measured speed (work per wall
second, relative to the count the work is counted at) and its whole-job draw.
A change of count after the first start (a resume after a pause included)
costs ``overhead_s`` without progress at the *new* count's power: the job
checkpoints, relaunches at the new world size and reshards. The first start
is free. A pause after the first start draws ``waiting_power_w`` for the
whole slot (0 when the replicas are released). The job finishes part-way
through its last slot and only that part is charged.

The state of the DP is (slot, what ran in the previous slot, remaining work):
"fresh" (never started), "paused", or "running at option k". Remaining work
is counted in bins; progress per slot is rounded *down* to whole bins, so a
plan that looks feasible really is. Values are numpy arrays over bins; one
slot costs O(options × bins), so 24 hourly slots × 8 counts × 2,000 bins take
a few milliseconds.

The planner reports, besides the plan, what each choice for the *first* slot
would cost (the best plan that starts with it), so a policy can refuse a
change whose expected saving does not beat a margin for forecast error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from greentrain.policies.planner import Mode, Slot, bin_size_s, running_intervals
from greentrain.units import J_PER_KWH

__all__ = ["FRESH", "PAUSED", "ScalingPlan", "plan_scaling", "running_state"]

FRESH = -2
"""Start state: never started (the first start is free)."""
PAUSED = -1
"""Start state: started, now paused (any run pays the overhead; the pause draws the waiting power)."""
_TIE_BREAK = 1e-9  # later slots cost a hair more, so equal-cost plans run early


def running_state(index: int) -> int:
    """Start state: running at ``options[index]`` (staying costs nothing extra, a change the overhead)."""
    return index


@dataclass(frozen=True, slots=True)
class ScalingPlan:
    """The option per slot (None = paused) and what the plan is expected to cost."""

    slots: tuple[Slot, ...]
    modes: tuple[Mode | None, ...]
    run_s: tuple[float, ...]
    """Seconds spent running (overhead included) in each slot."""
    emissions_g: float
    """Expected emissions of running, restarting and waiting (net)."""
    energy_j: float
    finish: datetime
    changes: int
    """Restarts the plan pays for (count changes and resumes after a pause)."""
    first_costs_g: dict[int, float] = field(default_factory=dict)
    """Expected emissions of the best plan that starts with each first-slot choice, by replica count
    (0 = pause); missing or inf when that choice cannot meet the deadline."""

    def running_intervals(self) -> tuple[tuple[datetime, datetime], ...]:
        """Merged [start, end) intervals in which the job runs (at any count)."""
        return running_intervals(self.slots, self.run_s)


@dataclass(slots=True)
class _ScalingTables:
    """Per slot length: joules and the remaining-bin index after the slot, shape (2, K, N+1):
    [0] runs without a restart, [1] after one."""

    quantum_s: float
    n: int
    overhead_s: float
    options: Sequence[Mode]
    by_length: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)

    def get(self, length_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(joules, gather, flat): ``flat`` indexes the running states' rows of a values array, raveled."""
        if length_s not in self.by_length:
            joules, gather = self._build(length_s)
            rows = np.arange(len(self.options))[None, :, None] * (self.n + 1)
            self.by_length[length_s] = (joules, gather, rows + gather)
        return self.by_length[length_s]

    def _build(self, length_s: float) -> tuple[np.ndarray, np.ndarray]:
        k_count, n = len(self.options), self.n
        joules = np.empty((2, k_count, n + 1))
        gather = np.zeros((2, k_count, n + 1), dtype=np.intp)
        bins = np.arange(n + 1)
        for variant, over_s in enumerate((0.0, min(self.overhead_s, length_s))):
            avail_s = length_s - over_s
            for k, mode in enumerate(self.options):
                progress = math.floor(mode.speed * avail_s / self.quantum_s + 1e-9)
                fixed_j = mode.power_w * over_s  # the restart runs at the new count's power
                done = bins <= progress
                part_j = fixed_j + mode.power_w * bins * self.quantum_s / mode.speed
                joules[variant, k] = np.where(done, part_j, fixed_j + mode.power_w * avail_s)
                gather[variant, k] = np.where(done, 0, bins - progress)
        return joules, gather


def _g_per_j(slot: Slot, t: int) -> float:
    return slot.intensity_g_per_kwh * (1.0 + _TIE_BREAK * t) / J_PER_KWH


def _run_costs(tables: _ScalingTables, slot: Slot, t: int, after: np.ndarray) -> np.ndarray:
    """Cost of running each option in slot t and optimally after: shape (2, K, N+1) (no restart / restart).
    ``after`` is values[t+1], rows: options 0..K-1, then paused, then fresh."""
    joules, _, flat = tables.get(slot.duration_s)
    running = after[:len(tables.options)].ravel()
    return joules * _g_per_j(slot, t) + running.take(flat)


def _backward(tables: _ScalingTables, slots: Sequence[Slot], waiting_power_w: float) -> list[np.ndarray]:
    """values[t][state, bins]: least emissions from slot t on; states 0..K-1 running at option k,
    K paused, K+1 fresh; values[len(slots)] is terminal."""
    k_count, n = len(tables.options), tables.n
    terminal = np.full((k_count + 2, n + 1), np.inf)
    terminal[:, 0] = 0.0
    values = [terminal] * (len(slots) + 1)
    after = terminal
    columns, options_col = np.arange(n + 1), np.arange(k_count)[:, None]
    for t in range(len(slots) - 1, -1, -1):
        slot = slots[t]
        run = _run_costs(tables, slot, t, after)
        stay, restart = run[0], run[1]
        wait = after[k_count] + waiting_power_w * slot.duration_s * _g_per_j(slot, t)
        # Running at k and changing to another count: the best restart at any option but k.
        first = restart.argmin(axis=0)
        best_restart = restart[first, columns]
        masked = restart.copy()
        masked[first, columns] = np.inf
        other = np.where(first[None, :] == options_col, masked.min(axis=0)[None, :], best_restart[None, :])
        value = np.empty_like(after)
        value[:k_count] = np.minimum(np.minimum(stay, other), wait[None, :])
        value[k_count] = np.minimum(wait, best_restart)
        value[k_count + 1] = np.minimum(after[k_count + 1], stay.min(axis=0))
        value[:, 0] = 0.0
        values[t] = value
        after = value
    return values


def _state_row(state: int, k_count: int) -> int:
    return {FRESH: k_count + 1, PAUSED: k_count}.get(state, state)


def _choice_costs(tables: _ScalingTables, slots: Sequence[Slot], t: int, state: int, index: int,
                  values: list[np.ndarray], waiting_power_w: float) -> list[float]:
    """Cost of each choice at (t, state, index): options 0..K-1, then pause (index K)."""
    k_count = len(tables.options)
    slot, after = slots[t], values[t + 1]
    joules, gather, _ = tables.get(slot.duration_s)
    g_per_j = _g_per_j(slot, t)
    costs = []
    for k in range(k_count):
        variant = 0 if state in (FRESH, k) else 1
        costs.append(float(joules[variant, k, index] * g_per_j + after[k, gather[variant, k, index]]))
    waiting_g = 0.0 if state == FRESH else waiting_power_w * slot.duration_s * g_per_j
    costs.append(float(after[k_count + 1 if state == FRESH else k_count, index] + waiting_g))
    return costs


def plan_scaling(
    slots: Sequence[Slot],
    work_s: float,
    options: Sequence[Mode],
    *,
    overhead_s: float = 0.0,
    state: int = FRESH,
    waiting_power_w: float = 0.0,
    max_bins: int = 2000,
) -> ScalingPlan | None:
    """The minimum-emission replica plan finishing ``work_s`` within ``slots``; None if impossible.

    ``options`` are the allowed counts as modes (``Mode.replicas`` set, speed > 0, power > 0);
    ``state`` is ``FRESH``, ``PAUSED`` or ``running_state(i)`` for ``options[i]``. Ties prefer
    running early, and the earlier option in the list.
    """
    if not options or any(m.speed <= 0 or m.power_w <= 0 for m in options):
        raise ValueError("plan_scaling: need at least one option, each with speed > 0 and power > 0")
    if not waiting_power_w >= 0:
        raise ValueError(f"plan_scaling: waiting_power_w must be >= 0, got {waiting_power_w}")
    if not (state in (FRESH, PAUSED) or 0 <= state < len(options)):
        raise ValueError(f"plan_scaling: state {state} is not FRESH, PAUSED or an option index")
    if work_s <= 0 or not slots:
        if work_s > 0:
            return None
        start = slots[0].start if slots else datetime.max
        return ScalingPlan(tuple(slots), (None,) * len(slots), (0.0,) * len(slots), 0.0, 0.0, start, 0)
    quantum_s = bin_size_s(work_s, max_bins)
    n = math.ceil(work_s / quantum_s - 1e-9)
    tables = _ScalingTables(quantum_s, n, overhead_s, options)
    values = _backward(tables, slots, waiting_power_w)
    if not np.isfinite(values[0][_state_row(state, len(options)), n]):
        return None
    return _forward(tables, slots, work_s, state, values, waiting_power_w)


def _forward(tables: _ScalingTables, slots: Sequence[Slot], work_s: float, state: int, values: list[np.ndarray],
             waiting_power_w: float) -> ScalingPlan:
    """Follow the choices from the start, tracking exact (unrounded) remaining work."""
    options, k_count = tables.options, len(tables.options)
    remaining_s = work_s
    chosen: list[Mode | None] = []
    run_list: list[float] = []
    emissions_g = energy_j = 0.0
    changes = 0
    finish = slots[-1].end
    first_costs: dict[int, float] = {}
    for t, slot in enumerate(slots):
        if remaining_s <= 1e-9:
            chosen.append(None)
            run_list.append(0.0)
            continue
        # Real progress is never below the rounded-down plan, so this index is never above it.
        index = min(math.ceil(remaining_s / tables.quantum_s - 1e-9), tables.n)
        costs = _choice_costs(tables, slots, t, state, index, values, waiting_power_w)
        if t == 0:
            first_costs = {int(m.replicas or 0): c for m, c in zip(options, costs)} | {0: costs[k_count]}
        k = min(range(k_count + 1), key=lambda i: (costs[i], i))  # runs win ties over the pause (last)
        if k == k_count:
            chosen.append(None)
            run_list.append(0.0)
            if state != FRESH:
                wait_j = waiting_power_w * slot.duration_s
                energy_j += wait_j
                emissions_g += wait_j * slot.intensity_g_per_kwh / J_PER_KWH
                state = PAUSED
            continue
        mode = options[k]
        restart = state not in (FRESH, k)
        over_s = min(tables.overhead_s, slot.duration_s) if restart else 0.0
        changes += restart
        run_s = min(slot.duration_s, over_s + remaining_s / mode.speed)
        slot_j = mode.power_w * run_s
        remaining_s -= mode.speed * (run_s - over_s)
        energy_j += slot_j
        emissions_g += slot_j * slot.intensity_g_per_kwh / J_PER_KWH
        chosen.append(mode)
        run_list.append(run_s)
        state = k
        if remaining_s <= 1e-9:
            finish = slot.start + timedelta(seconds=run_s)
    return ScalingPlan(tuple(slots), tuple(chosen), tuple(run_list), emissions_g, energy_j, finish, changes,
                       first_costs)
