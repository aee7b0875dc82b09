"""What planners need from a Snapshot: intensity slots up to the deadline, modes, margins.

Shared by the built-in policies so they read the snapshot the same way: the
current interval uses the measured ``carbon_now``; later intervals use the
forecast; a gap in the forecast keeps the previous value and time past the
forecast's end gets the mean of everything known (no information beyond it).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from greentrain.clock import ensure_aware_utc
from greentrain.hours import floor_hour as _hour
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, Snapshot
from greentrain.policies.slot_planner import J_PER_KWH, Mode, Slot, StartState

__all__ = [
    "capacity_after_pause_s",
    "capacity_s",
    "fastest",
    "horizon_end",
    "horizon_slots",
    "intensity_slots",
    "modes_of",
    "pause_decision",
    "pause_net_saving_g",
    "pause_pays",
    "run_decision",
    "run_now_g",
    "safety_margin_s",
    "slot_emissions_g",
    "start_state",
]

_HOUR = timedelta(hours=1)


def _known_points(snapshot: Snapshot) -> list[tuple[datetime, datetime, float]]:
    known: list[tuple[datetime, datetime, float]] = []
    if snapshot.carbon_now is not None:
        now_point = snapshot.carbon_now
        known.append((now_point.start, now_point.end, now_point.intensity_g_per_kwh))
    for point in snapshot.forecast:
        if known and point.start < known[-1][1]:
            continue  # the measured value (or an earlier point) already covers this time
        known.append((point.start, point.end, point.intensity_g_per_kwh))
    return known


def intensity_slots(snapshot: Snapshot, now: datetime, end: datetime) -> list[Slot]:
    """Slots of constant intensity covering [now, end); [] when no intensity is known at all."""
    known = _known_points(snapshot)
    if not known or end <= now:
        return []
    tail_g = sum(v for _, _, v in known) / len(known)
    slots: list[Slot] = []
    cursor, last_g, i = now, known[0][2], 0
    while cursor < end:
        while i < len(known) and known[i][1] <= cursor:
            last_g = known[i][2]
            i += 1
        if i < len(known) and known[i][0] <= cursor:
            _, stop, value = known[i]
            slot_end, last_g = min(stop, end), value
        elif i < len(known):
            slot_end, value = min(known[i][0], end), last_g  # gap: persist the previous value
        else:
            # Past the forecast: hour-aligned slots at the mean of what is known.
            next_hour = _hour(cursor) + _HOUR
            slot_end, value = min(next_hour, end), tail_g
        slots.append(Slot(cursor, slot_end, value))
        cursor = slot_end
    return slots[:1] + _hourly(slots[1:])


def _hourly(slots: list[Slot]) -> list[Slot]:
    """Merge sub-hourly slots (5-minute or half-hourly forecasts) into hour-bounded ones.

    Planning per hour keeps the DP small (72 slots for 72 h whatever the
    provider's resolution); the merged value is the time-weighted mean.
    """
    merged: list[Slot] = []
    for slot in slots:
        last = merged[-1] if merged else None
        if last is not None and last.end == slot.start and _hour(last.start) == _hour(slot.start):
            length_s = last.duration_s + slot.duration_s
            mean_g = (last.intensity_g_per_kwh * last.duration_s + slot.intensity_g_per_kwh * slot.duration_s) / length_s
            merged[-1] = Slot(last.start, slot.end, mean_g)
        else:
            merged.append(slot)
    return merged


def modes_of(snapshot: Snapshot, *, power: bool = True) -> list[Mode]:
    """Operating points as planner modes, fastest first, without dominated ones.

    A point that is no faster yet draws no less than another is never worth
    choosing. With ``power=False`` only the fastest point is returned. With no
    measured points there is one mode: full speed at the measured draw.
    """
    points = [p for p in snapshot.operating_points if p.relative_speed > 0 and p.power_w > 0]
    if not points:
        return [Mode(1.0, snapshot.power_w or 1.0, snapshot.current_power_limit_w)]
    ordered = sorted(points, key=lambda p: (-p.relative_speed, p.power_w))
    modes: list[Mode] = []
    for point in ordered:
        if modes and point.power_w >= min(m.power_w for m in modes):
            continue
        modes.append(Mode(point.relative_speed, point.power_w, point.power_limit_w, point.sm_clocks_mhz))
        if not power:
            break
    return modes


def fastest(modes: list[Mode]) -> Mode:
    return max(modes, key=lambda m: m.speed)


def horizon_end(snapshot: Snapshot, now: datetime) -> datetime | None:
    """The deadline, or without one the end of what is forecast (None if nothing is)."""
    if snapshot.deadline is not None:
        return ensure_aware_utc(snapshot.deadline, "snapshot.deadline")
    ends = [p.end for p in snapshot.forecast]
    if snapshot.carbon_now is not None:
        ends.append(snapshot.carbon_now.end)
    return max(ends) if ends else None


def horizon_slots(snapshot: Snapshot, now: datetime) -> tuple[datetime | None, list[Slot]]:
    """``horizon_end`` and the intensity slots from ``now`` up to it (none without an end)."""
    end = horizon_end(snapshot, now)
    return end, intensity_slots(snapshot, now, end) if end is not None else []


def safety_margin_s(snapshot: Snapshot, safety_z: float, reserve_s: float) -> float:
    """Extra work to plan for: ``reserve_s`` plus the pessimistic rate's extra time when the snapshot has
    it, else ``safety_z`` standard deviations of step time.

    If steps could run ``z·σ/μ`` slower than measured for the rest of the job,
    the remaining time grows by that fraction; the plan keeps room for it.
    """
    margin_s = reserve_s
    if snapshot.work_remaining_upper_s is not None:  # the measured spread of the rate (policies/rate.py)
        return margin_s + max(0.0, snapshot.work_remaining_upper_s - snapshot.work_remaining_s)
    if snapshot.step_time_s and snapshot.step_time_s > 0 and snapshot.step_time_std_s > 0:
        margin_s += safety_z * snapshot.step_time_std_s / snapshot.step_time_s * snapshot.work_remaining_s
    return margin_s


def start_state(snapshot: Snapshot) -> StartState:
    return {
        JobState.WAITING: StartState.FRESH,
        JobState.RUNNING: StartState.RUNNING,
        JobState.PAUSED: StartState.PAUSED,
    }[snapshot.state]


def capacity_s(snapshot: Snapshot, now: datetime, end: datetime, speed: float) -> float:
    """Full-speed work that fits in [now, end) running flat out from now (a resume first if paused)."""
    overhead_s = snapshot.resume_overhead_s if snapshot.state == JobState.PAUSED else 0.0
    return max(0.0, ((end - now).total_seconds() - overhead_s) * speed)


def capacity_after_pause_s(snapshot: Snapshot, resume_at: datetime, end: datetime, speed: float) -> float:
    """Work that still fits if the job pauses until ``resume_at`` (a started job then pays a resume)."""
    overhead_s = snapshot.resume_overhead_s if snapshot.state != JobState.WAITING else 0.0
    return max(0.0, ((end - resume_at).total_seconds() - overhead_s) * speed)


def pause_net_saving_g(snapshot: Snapshot, slot: Slot, power_w: float, later_g_per_kwh: float) -> float:
    """Expected net emissions saved by pausing through ``slot`` and running its work later at
    ``later_g_per_kwh``: the running avoided, minus the later running, the held hardware's
    waiting draw (none before the first start) and the resume a running job adds by pausing."""
    length_s = slot.duration_s
    saving_j_g = power_w * length_s * (slot.intensity_g_per_kwh - later_g_per_kwh)
    if snapshot.state != JobState.WAITING:
        saving_j_g -= snapshot.waiting_power_w * length_s * slot.intensity_g_per_kwh
    if snapshot.state == JobState.RUNNING:
        saving_j_g -= power_w * snapshot.resume_overhead_s * later_g_per_kwh
    return saving_j_g / J_PER_KWH


def slot_emissions_g(power_w: float, slot: Slot) -> float:
    """Emissions of drawing ``power_w`` through the whole of ``slot``, grams."""
    return power_w * slot.duration_s * slot.intensity_g_per_kwh / J_PER_KWH


def pause_pays(snapshot: Snapshot, saving_g: float, slot: Slot, power_w: float, min_pause_saving: float) -> bool:
    """Whether a pause through ``slot`` saving ``saving_g`` beats the margin: ``min_pause_saving`` of what
    running the slot at ``power_w`` emits. The margin guards pauses that cost waiting and a resume if the
    forecast is wrong; a delayed first start costs neither (it is re-planned every interval), so any saving pays."""
    margin = min_pause_saving if snapshot.state != JobState.WAITING else 0.0
    return saving_g > margin * slot_emissions_g(power_w, slot)


def run_now_g(slots: list[Slot], work_s: float, mode: Mode) -> float:
    """Expected emissions of running ``work_s`` flat out at ``mode`` from the first slot, grams."""
    left_s, total_g = max(0.0, work_s), 0.0
    for slot in slots:
        if left_s <= 0:
            break
        run_s = min(slot.duration_s, left_s / mode.speed)
        total_g += mode.power_w * run_s * slot.intensity_g_per_kwh / J_PER_KWH
        left_s -= run_s * mode.speed
    return total_g


def run_decision(mode: Mode, now: datetime, work_s: float, reason: str,
                 until: datetime | None = None,
                 plan: tuple[tuple[datetime, datetime], ...] | None = None, to_the_end: bool = False) -> Decision:
    """RUN at ``mode``; the default plan is running flat out from ``now``."""
    if plan is None:
        finish = now + timedelta(seconds=work_s / mode.speed if math.isfinite(work_s) else 0.0)
        plan = ((now, finish),)
    return Decision(action=Action.RUN, until=until, power_limit_w=mode.power_limit_w,
                    sm_clocks_mhz=mode.sm_clocks_mhz, reason=reason, plan=plan, to_the_end=to_the_end)


def pause_decision(snapshot: Snapshot, until: datetime, reason: str,
                   plan: tuple[tuple[datetime, datetime], ...] = (), saving_g: float | None = None) -> Decision:
    """PAUSE (or DELAY_START if never started) until ``until``, when the policy re-plans; ``saving_g``: the
    wait's expected net saving."""
    action = Action.DELAY_START if snapshot.state == JobState.WAITING else Action.PAUSE
    return Decision(action=action, until=until, reason=reason, plan=plan, saving_g=saving_g)
