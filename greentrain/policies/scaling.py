"""Carbon scaling: the replica count per interval for an elastic job (``carbon-aware`` with a profile).

With a scaling profile in the snapshot, ``carbon-aware`` plans the rest of the
job over the forecast with ``plan_scaling``: per interval pause (0 replicas)
or run at one of the allowed counts, each at its measured throughput and
power, with a restart's overhead at every change and the waiting draw while
paused. It commits only to the current interval and re-plans at the next.

A change the plan wants (another count, or a pause) is made only when its
expected net saving over keeping the current count, overhead included, beats
a margin for forecast error (``min_change_saving``, ``min_pause_saving`` for
a pause, as fractions of what the current interval would emit at the current
count); otherwise the job keeps its count. Keeping it is always one of the
plans the DP priced, so the deadline stays safe.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from greentrain.jobstats import JobState
from greentrain.policies.base import Decision, Snapshot
from greentrain.policies.slot_planner import FRESH, PAUSED, Mode, Plan, plan_scaling, running_state
from greentrain.policies.window import (
    horizon_slots,
    pause_decision,
    run_decision,
    safety_margin_s,
    slot_emissions_g,
)

__all__ = ["MarginsLike", "replica_options", "decide_scaling"]


class MarginsLike(Protocol):
    """What the scaling path reads from the policy's config (``CarbonAwareConfig``)."""

    safety_z: float
    reserve_s: float
    max_bins: int
    min_pause_saving: float
    min_change_saving: float


def replica_options(snapshot: Snapshot) -> tuple[list[Mode], int] | None:
    """The allowed counts as planner modes (speed relative to the count work is counted at) and that count;
    None when the snapshot cannot be scaled (no profile, or the work's count is not in it)."""
    profile = snapshot.scaling
    if profile is None:
        return None
    reference = snapshot.work_replicas or snapshot.replicas
    if reference not in profile.replica_counts:
        return None
    high = snapshot.max_replicas if snapshot.max_replicas is not None else max(profile.replica_counts)
    current = snapshot.replicas if snapshot.state == JobState.RUNNING else 0
    modes = [Mode(profile.speed(r, reference), profile.power_w(r), replicas=r)
             for r in profile.replica_counts if snapshot.min_replicas <= r <= high]
    # A count that is no faster yet draws no less than another is never worth moving to (staying may be).
    kept = [m for m in modes if m.replicas == current
            or not any(o.speed >= m.speed and o.power_w <= m.power_w and o != m for o in modes)]
    return (kept, reference) if kept else None


def _state(snapshot: Snapshot, options: list[Mode], current: int) -> int:
    if snapshot.state == JobState.WAITING:
        return FRESH
    if snapshot.state == JobState.PAUSED:
        return PAUSED
    index = next((i for i, m in enumerate(options) if m.replicas == current), None)
    return PAUSED if index is None else running_state(index)  # an unlisted count: every option restarts


def decide_scaling(config: MarginsLike, name: str, snapshot: Snapshot, now: datetime) -> Decision | None:
    """The scaling decision, or None when the snapshot has no usable profile (plan timing only)."""
    found = replica_options(snapshot)
    if found is None:
        return None
    options, reference = found
    top = max(options, key=lambda m: (m.speed, -m.power_w))
    current = (snapshot.replicas or reference) if snapshot.state == JobState.RUNNING else 0
    work_s = max(snapshot.work_remaining_s, 0.0)
    end, slots = horizon_slots(snapshot, now)
    if end is not None and end <= now:
        return _run(top, now, work_s, f"{name}: deadline reached; running flat out at {top.replicas} replicas",
                    to_the_end=True)
    if work_s <= 0 or not slots or end is None:  # no slots without an end
        keep = next((m for m in options if m.replicas == (current or reference)), top)
        return _run(keep, now, work_s, f"{name}: nothing to plan (no work or no carbon signal)")
    state = _state(snapshot, options, current)
    fastest, room_s = _flat_out(options, state, (end - now).total_seconds(), snapshot.resume_overhead_s)
    if room_s < work_s:
        return _run(fastest, now, work_s, f"{name}: deadline cannot be met; running flat out at "
                    f"{fastest.replicas} replicas", to_the_end=True)
    margin_s = safety_margin_s(snapshot, config.safety_z, config.reserve_s)
    plan = plan_scaling(slots, min(work_s + margin_s, room_s), options, overhead_s=snapshot.resume_overhead_s,
                        state=state, waiting_power_w=snapshot.waiting_power_w, max_bins=config.max_bins)
    if plan is None:
        return _run(fastest, now, work_s, f"{name}: no room for a change within the safety margin; running this "
                    f"interval at {fastest.replicas} replicas", until=slots[0].end)
    return _commit(config, name, snapshot, now, plan, options, current, state)


def _flat_out(options: list[Mode], state: int, left_s: float, overhead_s: float) -> tuple[Mode, float]:
    """The count that does the most work from now to the deadline, and that work: the fastest count pays a
    restart unless it is running already, so staying at a slower one can do more."""
    def work(i: int) -> float:
        restart_s = 0.0 if state in (FRESH, i) else overhead_s
        return max(0.0, left_s - restart_s) * options[i].speed

    best = max(range(len(options)), key=lambda i: (work(i), -options[i].power_w))
    return options[best], work(best)


def _commit(config: MarginsLike, name: str, snapshot: Snapshot, now: datetime, plan: Plan,
            options: list[Mode], current: int, state: int) -> Decision:
    """The plan's first choice, unless keeping the current count (or running, when paused) is within the margin."""
    slot = plan.slots[0]
    costs = plan.first_costs_g
    by_count = {m.replicas: m for m in options}
    best = 0 if plan.modes[0] is None else int(plan.modes[0].replicas or 0)
    intervals = plan.running_intervals()
    work_s = max(snapshot.work_remaining_s, 0.0)
    if state not in (FRESH, PAUSED) and best != current and math.isfinite(costs.get(current, math.inf)):
        saving_g = costs[current] - costs[best]
        margin = config.min_pause_saving if best == 0 else config.min_change_saving
        if saving_g <= margin * slot_emissions_g(by_count[current].power_w, slot):
            reason = (f"{name}: {current} replicas at {slot.intensity_g_per_kwh:.0f} g/kWh; "
                      f"{_describe(best)} would save only {saving_g:.3g} g net of its restart (margin {margin:.0%})")
            return _run(by_count[current], now, work_s, reason, until=slot.end)
    if best == 0 and state == PAUSED:
        runs = {r: c for r, c in costs.items() if r != 0 and math.isfinite(c)}
        if runs:
            resume = min(runs, key=lambda r: (runs[r], -by_count[r].speed))
            saving_g = runs[resume] - costs[0]
            if saving_g <= config.min_pause_saving * slot_emissions_g(by_count[resume].power_w, slot):
                reason = (f"{name}: a longer pause would save only {saving_g:.3g} g net of "
                          f"{snapshot.waiting_power_w:.0f} W waiting; resuming at {resume} replicas")
                return _run(by_count[resume], now, work_s, reason, until=slot.end)
    if best == 0:
        saving_g = min((c for r, c in costs.items() if r != 0), default=math.inf) - costs[0]
        reason = (f"{name}: {slot.intensity_g_per_kwh:.0f} g/kWh now; pausing (0 replicas) saves {saving_g:.3g} g net "
                  f"of {snapshot.waiting_power_w:.0f} W waiting and the restart")
        return replace(pause_decision(snapshot, slot.end, reason, intervals), replicas=0)
    reason = f"{name}: {best} replicas this interval at {slot.intensity_g_per_kwh:.0f} g/kWh"
    if state not in (FRESH, PAUSED) and best != current:
        reason += f" (from {current}: saves {costs[current] - costs[best]:.3g} g net of the restart)"
    return _run(by_count[best], now, work_s, reason, until=slot.end, plan=intervals)


def _describe(replicas: int) -> str:
    return "pausing" if replicas == 0 else f"{replicas} replicas"


def _run(mode: Mode, now: datetime, work_s: float, reason: str, **kwargs) -> Decision:
    return replace(run_decision(mode, now, work_s, reason, **kwargs), replicas=mode.replicas)
