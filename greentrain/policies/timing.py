"""Simple timing policies: run now, run below a threshold, start in the best window.

``run-now`` is the baseline. ``threshold`` runs while the grid is cleaner than
a level and pauses otherwise, until the deadline forces it to run.
``best-window`` only chooses when to *start* (what a window API offers) and
then runs to the end; it cannot exploit a dirty spell in the middle of a job.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.jobstats import JobState
from greentrain.policies.base import Decision, Snapshot
from greentrain.policies.configured import ConfiguredPolicy
from greentrain.policies.margins import DeadlineRoom, PauseMargins
from greentrain.policies.slot_planner import Mode
from greentrain.policies.window import (
    capacity_after_pause_s,
    capacity_s,
    fastest,
    horizon_slots,
    modes_of,
    pause_decision,
    pause_net_saving_g,
    pause_pays,
    run_decision,
    safety_margin_s,
)
from greentrain.windows import cleanest_start

__all__ = [
    "BestWindowConfig",
    "BestWindowPolicy",
    "RunNowConfig",
    "RunNowPolicy",
    "ThresholdConfig",
    "ThresholdPolicy",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunNowConfig:
    """run-now has no parameters."""


class _FastestModePolicy(ConfiguredPolicy):
    """A simple timing policy: it runs at the fastest mode (operating points are not its business) or waits."""

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        now = ensure_aware_utc(now, "now")
        mode = fastest(modes_of(snapshot, power=False))
        return self._decide_at(snapshot, now, mode, max(snapshot.work_remaining_s, 0.0))

    def _decide_at(self, snapshot: Snapshot, now: datetime, mode: Mode, work_s: float) -> Decision:
        """The decision at ``now`` (aware UTC) with ``work_s`` of full-speed work left, running at ``mode``."""
        raise NotImplementedError


class RunNowPolicy(_FastestModePolicy):
    """Always run, at full speed: the baseline every saving is measured against."""

    name = "run-now"
    Config = RunNowConfig

    def _decide_at(self, snapshot: Snapshot, now: datetime, mode: Mode, work_s: float) -> Decision:
        return run_decision(mode, now, work_s, "run-now: always run")


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdConfig(PauseMargins):
    """Run when intensity <= a level; otherwise pause while the deadline allows."""

    threshold_g_per_kwh: float | None = None
    """Absolute level in gCO2eq/kWh; when unset, ``percentile`` of the intensities up to the deadline is used."""
    percentile: float = 50.0
    """Percentile (0-100) of known/forecast intensity from now to the deadline that counts as clean."""

    def __post_init__(self) -> None:
        PauseMargins.__post_init__(self)
        if self.threshold_g_per_kwh is not None and self.threshold_g_per_kwh < 0:
            raise ConfigError(f"threshold_g_per_kwh: must be >= 0, got {self.threshold_g_per_kwh}")
        if not 0 <= self.percentile <= 100:
            raise ConfigError(f"percentile: must be in [0, 100], got {self.percentile}")


class ThresholdPolicy(_FastestModePolicy):
    """Run in clean intervals, pause in dirty ones; run unconditionally once the slack is gone."""

    name = "threshold"
    Config = ThresholdConfig

    def _decide_at(self, snapshot: Snapshot, now: datetime, mode: Mode, work_s: float) -> Decision:
        end, slots = horizon_slots(snapshot, now)
        if work_s <= 0 or not slots or end is None:  # no end: no slots either
            return run_decision(mode, now, work_s, "threshold: nothing to plan (no work or no carbon signal)")
        level = self.config.threshold_g_per_kwh
        if level is None:
            level = float(np.percentile([s.intensity_g_per_kwh for s in slots], self.config.percentile))
        current = slots[0].intensity_g_per_kwh
        if current <= level:
            return run_decision(mode, now, work_s, f"threshold: {current:.0f} <= {level:.0f} g/kWh")
        need_s = work_s + safety_margin_s(snapshot, self.config.safety_z, self.config.reserve_s)
        if capacity_after_pause_s(snapshot, slots[0].end, end, mode.speed) < need_s:
            return run_decision(mode, now, work_s, "threshold: pausing now would risk the deadline")
        # The paused interval's work runs later in a clean interval: expect their mean intensity.
        clean = [s.intensity_g_per_kwh for s in slots[1:] if s.intensity_g_per_kwh <= level] or [level]
        saving_g = pause_net_saving_g(snapshot, slots[0], mode.power_w, sum(clean) / len(clean))
        if not pause_pays(snapshot, saving_g, slots[0], mode.power_w, self.config.min_pause_saving):
            return run_decision(mode, now, work_s, f"threshold: {current:.0f} > {level:.0f} g/kWh, but a pause "
                                f"saves only {saving_g:.2f} g net of {snapshot.waiting_power_w:.0f} W waiting")
        return pause_decision(snapshot, slots[0].end, f"threshold: {current:.0f} > {level:.0f} g/kWh; "
                              f"pausing saves {saving_g:.1f} g net", saving_g=saving_g)


@dataclass(frozen=True, slots=True, kw_only=True)
class BestWindowConfig(DeadlineRoom):
    """Delay the start to the cleanest contiguous window that ends by the deadline (the window lengthened
    by the deadline's room)."""


class BestWindowPolicy(_FastestModePolicy):
    """Start-only: choose the start minimising forecast emissions, then never pause."""

    name = "best-window"
    Config = BestWindowConfig

    def _decide_at(self, snapshot: Snapshot, now: datetime, mode: Mode, work_s: float) -> Decision:
        if snapshot.state != JobState.WAITING or work_s <= 0:
            return run_decision(mode, now, work_s, "best-window: started, running to the end")
        end, slots = horizon_slots(snapshot, now)
        need_s = work_s + safety_margin_s(snapshot, self.config.safety_z, self.config.reserve_s)
        length_s = need_s / mode.speed
        if not slots or end is None or capacity_s(snapshot, now, end, mode.speed) <= need_s:
            return run_decision(mode, now, work_s, "best-window: no room to delay the start")
        best = _best_start(slots, now, length_s)
        plan = ((best, best + timedelta(seconds=length_s)),)
        if best <= now:
            return run_decision(mode, now, work_s, "best-window: the best window starts now", plan=plan)
        return pause_decision(snapshot, slots[0].end, f"best-window: cleanest start {best.isoformat()}", plan)


def _best_start(slots: list, now: datetime, length_s: float) -> datetime:
    """Slot start (or now) whose window of ``length_s`` has the least integrated intensity."""
    edges = [(s.start - now).total_seconds() for s in slots] + [(slots[-1].end - now).total_seconds()]
    return now + timedelta(seconds=cleanest_start(edges, [s.intensity_g_per_kwh for s in slots], length_s))
