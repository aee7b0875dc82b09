"""Measure stages and apply a plan through the device layer.

``StageTimer`` records forward/backward durations of one stage (wrap the
stage's forward and backward in its contexts; pass a ``sync`` such as
``torch.cuda.synchronize`` so GPU work is counted when it ends, not when it
is queued). ``profile_stage`` sweeps clocks on a stage's GPU through its
``ActuatorSet`` (journaled, restored on exit) and builds a ``StageProfile``.
``apply_plan`` locks each stage's GPU to its planned clock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from greentrain.device.base import GPU
from greentrain.errors import ConfigError
from greentrain.policies.base import Decision
from greentrain.stageclocks.clock_planner import ClockPoint, StageClockPlan, StageProfile

__all__ = ["StageTimer", "profile_stage", "apply_plan"]


class ClockKnobs(Protocol):
    """What locks a stage's clocks: its ``ActuatorSet``."""

    def apply(self, decision: Decision) -> list[str]:
        """Apply the decision's settings; the names of the knobs that changed."""
        ...


class StageTimer:
    """Mean forward and backward time of one pipeline stage."""

    def __init__(self, time_fn: Callable[[], float] = time.perf_counter, sync: Callable[[], None] | None = None) -> None:
        self._time_fn = time_fn
        self._sync = sync or (lambda: None)
        self._sums = {"F": [0.0, 0], "B": [0.0, 0]}

    @contextlib.contextmanager
    def _timed(self, kind: str) -> Iterator[None]:
        self._sync()
        start = self._time_fn()
        yield
        self._sync()
        entry = self._sums[kind]
        entry[0] += self._time_fn() - start
        entry[1] += 1

    def forward(self) -> contextlib.AbstractContextManager[None]:
        """Context around one microbatch's forward on this stage."""
        return self._timed("F")

    def backward(self) -> contextlib.AbstractContextManager[None]:
        """Context around one microbatch's backward on this stage."""
        return self._timed("B")

    def means_s(self) -> tuple[float, float]:
        """(mean forward s, mean backward s); ConfigError before anything was timed."""
        (f_sum, f_n), (b_sum, b_n) = self._sums["F"], self._sums["B"]
        if not f_n or not b_n:
            raise ConfigError("StageTimer: time at least one forward and one backward first")
        return f_sum / f_n, b_sum / b_n

    def reset(self) -> None:
        self._sums = {"F": [0.0, 0], "B": [0.0, 0]}


def profile_stage(
    gpu: GPU,
    actuators: ClockKnobs,
    clocks_mhz: Sequence[int],
    run_microbatches: Callable[[StageTimer], None],
    *,
    idle_power_w: float,
    time_fn: Callable[[], float] = time.perf_counter,
    power_fn: Callable[[], float] | None = None,
) -> StageProfile:
    """Lock ``gpu`` at each clock (via ``actuators.apply``), run ``run_microbatches(timer)``, record times and power."""
    if not clocks_mhz:
        raise ConfigError("profile_stage: clocks_mhz is empty")
    low = min(gpu.supported_sm_clocks_mhz())
    points = []
    for clock in sorted(set(clocks_mhz), reverse=True):
        applied = actuators.apply(Decision(sm_clocks_mhz=(low, int(clock))))
        if "sm_clocks" not in applied and clock != max(clocks_mhz):
            raise ConfigError(f"GPU {gpu.uuid}: clock {clock} MHz could not be locked; see the actuator log")
        timer = StageTimer(time_fn)
        run_microbatches(timer)
        forward_s, backward_s = timer.means_s()
        points.append(ClockPoint(int(clock), forward_s, backward_s, (power_fn or gpu.power_w)()))
    return StageProfile(tuple(points), idle_power_w)


def apply_plan(plan: StageClockPlan, actuators_by_stage: Sequence[ClockKnobs], gpus_by_stage: Sequence[GPU]) -> list[bool]:
    """Lock each stage's GPU to its planned max clock; returns per stage whether it was applied."""
    if not len(plan.clocks_mhz) == len(actuators_by_stage) == len(gpus_by_stage):
        raise ConfigError("apply_plan: need one ActuatorSet and one GPU per stage")
    results = []
    for clock, actuators, gpu in zip(plan.clocks_mhz, actuators_by_stage, gpus_by_stage):
        low = min(gpu.supported_sm_clocks_mhz())
        results.append("sm_clocks" in actuators.apply(Decision(sm_clocks_mhz=(low, clock))))
    return results
