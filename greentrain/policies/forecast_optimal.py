"""Forecast-optimal timing: the net-optimal plan over the forecast, committed one interval at a time.

At every decision the policy plans the rest of the job over the known and
forecast intensity up to the deadline with ``plan_schedule`` (a DP over run /
pause and, for ``carbon-aware`` (``greentrain.policies.carbon_aware``), every measured operating point, with the
resume overhead and the held hardware's waiting draw charged), commits only
to the current interval, and re-plans at the next one as measurements and
forecasts update. The forecast is first read through its measured bias by hours
ahead (``policies/calibrate.py``), so the plan is on its expected value. A pause is taken only when its expected net saving (what
running now would emit, minus the waiting and the later running and resume)
beats a margin for forecast error; otherwise the job runs, so a pause that
stops paying off (the forecast moved, the measured idle draw is higher) ends
at the next decision. The plan covers the
remaining work plus a safety margin from the measured step-time spread; the
margin can only shrink the options when the deadline is tight, and if even
flat-out running no longer fits the policy runs flat out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.policies.base import Decision, Snapshot
from greentrain.policies.calibrate import calibrated
from greentrain.policies.configured import ConfiguredPolicy
from greentrain.policies.margins import PauseMargins
from greentrain.policies.slot_planner import Mode, Plan, plan_schedule
from greentrain.policies.window import (
    capacity_s,
    fastest,
    horizon_slots,
    modes_of,
    pause_decision,
    pause_pays,
    run_decision,
    run_now_g,
    safety_margin_s,
    start_state,
)

__all__ = ["ForecastOptimalConfig", "ForecastOptimalPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ForecastOptimalConfig(PauseMargins):
    """Parameters of the forecast-optimal planner (its margins: ``PauseMargins``)."""

    max_bins: int = 1500
    """Resolution of remaining work in the DP (more = finer, slower)."""

    def __post_init__(self) -> None:
        PauseMargins.__post_init__(self)
        if not 50 <= self.max_bins <= 100_000:
            raise ConfigError(f"max_bins: must be in [50, 100000], got {self.max_bins}")


class ForecastOptimalPolicy(ConfiguredPolicy):
    """Minimum expected emissions by run/pause slots, deadline guaranteed, re-planned each interval."""

    name = "forecast-optimal"
    Config = ForecastOptimalConfig

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        now = ensure_aware_utc(now, "now")
        snapshot = calibrated(snapshot, now)  # the forecast's measured bias out: plan on its expected value
        modes = modes_of(snapshot, power=self.power_use != "none")
        top = fastest(modes)
        work_s = max(snapshot.work_remaining_s, 0.0)
        end, slots = horizon_slots(snapshot, now)
        if end is not None and end <= now:
            return run_decision(top, now, work_s, f"{self.name}: deadline reached; running flat out", to_the_end=True)
        if work_s <= 0 or not slots or end is None:  # no end: no slots either
            return run_decision(top, now, work_s, f"{self.name}: nothing to plan (no work or no carbon signal)")
        room_s = capacity_s(snapshot, now, end, top.speed)
        if room_s < work_s:
            return run_decision(top, now, work_s, f"{self.name}: deadline cannot be met; running flat out",
                                to_the_end=True)
        pessimism, margin_s = self._reserve(snapshot, work_s)
        plan = plan_schedule(
            slots,
            min(work_s + margin_s, room_s),
            modes,
            overhead_s=snapshot.resume_overhead_s,
            overhead_power_w=top.power_w,
            state=start_state(snapshot),
            max_bins=self.config.max_bins,
            memo=self.__dict__.setdefault("_memo", {}),  # a cache only: output depends on inputs alone
            waiting_power_w=snapshot.waiting_power_w,
            pessimism=pessimism,
        )
        if plan is None:
            # No plan fits work + safety margin in this horizon: run this interval and plan again at the next
            # decision (not a promise to run to the end: the margin may free up as the job speeds up).
            return run_decision(top, now, work_s, f"{self.name}: no room for a pause within the safety margin; "
                                "running this interval", until=slots[0].end)
        intervals = plan.running_intervals()
        first = plan.modes[0]
        decision = self._decide_first(snapshot, now, plan, slots, top, work_s, intervals, first)
        # The plan's own work (its safety margin excluded) against running it flat out now: what it expects
        # to save, in the summary's grams (the snapshot's power is the job's measured power).
        planned_j = plan.energy_j - plan.waiting_j
        scale = work_s / (work_s + margin_s) if work_s + margin_s > 0 else 1.0
        saving_g = run_now_g(slots, work_s, top) - plan.emissions_g * scale if planned_j > 0 else None
        return replace(decision, plan_saving_g=saving_g)

    def _reserve(self, snapshot: Snapshot, work_s: float) -> tuple[float, float]:
        """(pessimism, margin_s): with the engine's pessimistic remaining time (``policies/rate.py``) the plan
        keeps the expected work inside the pessimistic deadline envelope (it may wait only while the slower
        rate would still finish); without it, it plans extra work from the step-time spread."""
        upper_s = snapshot.work_remaining_upper_s
        if upper_s is not None and work_s > 0:
            return max(1.0, upper_s / work_s), self.config.reserve_s
        return 1.0, safety_margin_s(snapshot, self.config.safety_z, self.config.reserve_s)

    def _decide_first(self, snapshot: Snapshot, now: datetime, plan: Plan, slots: list, top: Mode, work_s: float,
                      intervals: tuple[tuple[datetime, datetime], ...], first: Mode | None) -> Decision:
        """The decision for the first interval of ``plan``: pause (if it pays beyond the margin) or run."""
        now_g = slots[0].intensity_g_per_kwh
        if first is None:
            if pause_pays(snapshot, plan.pause_saving_g, slots[0], top.power_w, self.config.min_pause_saving):
                reason = (f"{self.name}: {now_g:.0f} g/kWh now; pausing saves {_grams(plan.pause_saving_g)} net "
                          f"of {snapshot.waiting_power_w:.0f} W waiting")
                return pause_decision(snapshot, slots[0].end, reason, intervals, saving_g=plan.pause_saving_g)
            first = plan.first_run_mode or top
            reason = (f"{self.name}: a pause would save only {_grams(plan.pause_saving_g)} net of "
                      f"{snapshot.waiting_power_w:.0f} W waiting (margin {self.config.min_pause_saving:.0%}); running")
            return run_decision(first, now, work_s, reason, until=slots[0].end)
        reason = f"{self.name}: run this interval at {now_g:.0f} g/kWh"
        if math.isfinite(plan.pause_saving_g) and -plan.pause_saving_g > 0:
            reason += f" (pausing would add {_grams(-plan.pause_saving_g)} net of {snapshot.waiting_power_w:.0f} W waiting)"
        if self.power_use != "none" and first.power_limit_w is not None:
            reason += f", {first.power_limit_w:.0f} W limit"
        return run_decision(first, now, work_s, reason, until=slots[0].end, plan=intervals)


def _grams(value_g: float) -> str:
    """Grams for a reason line: three significant figures, never '-0'."""
    return f"{0.0 if abs(value_g) < 5e-13 else value_g:.3g} g"
