"""Pause mode ``auto``: hold the hardware through a pause, or release it.

Holding (``suspend``: the process waits, its GPUs stay allocated) costs the
held devices' idle draw for the whole pause. Releasing (checkpoint, then the
process exits and something relaunches it: a requeueing scheduler under
``relaunch="exit"``, or ``greentrain run``'s supervisor) costs a checkpoint and
a restart at running power, and nothing while waiting. ``auto`` releases when
a relauncher exists and the idle energy of the planned pause exceeds that
cost; otherwise it holds. Each choice is logged (``pause_mode`` event) and
counted (``greentrain_policy_actions_total{action="release"|"hold"}``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from greentrain.policies.base import Decision

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["PauseChoice", "auto_mode", "choose_pause", "record_choice"]

log = logging.getLogger("greentrain.pause")


@dataclass(frozen=True, slots=True)
class PauseChoice:
    """``mode``: 'checkpoint' (release) or 'suspend' (hold), and why."""

    mode: str
    reason: str

    @property
    def released(self) -> bool:
        return self.mode == "checkpoint"


def choose_pause(*, pause_s: float, waiting_power_w: float, running_power_w: float | None,
                 restart_s: float, can_release: bool) -> PauseChoice:
    """Release when a relauncher exists and holding ``pause_s`` of idle draw costs more energy than a
    checkpoint and restart (``restart_s`` at ``running_power_w``)."""
    hold_j = waiting_power_w * max(0.0, pause_s)
    restart_j = (running_power_w or 0.0) * restart_s
    figures = (f"holding {pause_s / 3600:.2f} h at {waiting_power_w:.0f} W = {hold_j / 1000:.1f} kJ, "
               f"checkpoint + restart {restart_s:.0f} s at {running_power_w or 0.0:.0f} W = {restart_j / 1000:.1f} kJ")
    if not can_release:
        return PauseChoice("suspend", f"hold: nothing would relaunch the job ({figures})")
    if hold_j > restart_j:
        return PauseChoice("checkpoint", f"release: {figures}")
    return PauseChoice("suspend", f"hold: {figures}")


def auto_mode(engine: EngineCore, decision: Decision, *, can_release: bool) -> str:
    """Choose and record the mode of the pause ``decision`` asks for; 'checkpoint' or 'suspend'."""
    now = engine.clock.now()
    choice = choose_pause(pause_s=((decision.until or now) - now).total_seconds(),
                          waiting_power_w=engine.pause_cost.held_w, running_power_w=engine.power_w(),
                          restart_s=engine.deadline.resume_overhead_s, can_release=can_release)
    record_choice(engine, choice)
    return choice.mode


def record_choice(engine: EngineCore, choice: PauseChoice) -> None:
    """Tell the engine (its waiting draw is 0 while released), the run log and the metrics."""
    engine.pause_cost.set_released(choice.released)
    engine.log_pause_cost()
    engine.event("pause_mode", mode=choice.mode, released=choice.released, reason=choice.reason)
    engine.io.job_stats.count_action("release" if choice.released else "hold")
    log.info("greentrain: pause mode auto: %s", choice.reason)
