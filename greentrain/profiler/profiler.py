"""Online operating-point profiler: measure time and energy per step at each setting during warm-up.

As Zeus does, the first steps of a real job are spent stepping through power
limits (or locked SM clock ranges): at each setting a few steps settle, a few
more are measured on the real device (energy counter, wall time). The result
is a tuple of ``OperatingPoint``\\ s for ``Snapshot.operating_points``; ranks
combine their measurements (slowest step time, summed energy) so every rank
ends with the same profile. Profiles are cached per (GPU model, workload
fingerprint); a recurring job skips straight to the cached result.

Usage in a training loop::

    profiler = OperatingPointProfiler(gpus, actuators, fingerprint=workload_fingerprint(model, batch_size=64))
    for batch in loader:
        profiler.before_step()
        train_step(batch)
        profiler.after_step()
        if profiler.done:
            points = profiler.result()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from greentrain.device.base import GPU
from greentrain.errors import ConfigError, GreentrainError
from greentrain.policies.base import Decision, OperatingPoint
from greentrain.profiler.cache import ProfileCache
from greentrain.profiler.collective import Collective, default_collective

__all__ = ["ProfilerConfig", "OperatingPointProfiler", "power_limit_grid", "sm_clock_grid", "energy_optimal"]

log = logging.getLogger(__name__)


class Knobs(Protocol):
    """What sets each candidate: an ``ActuatorSet`` (or a stand-in that may report nothing)."""

    def apply(self, decision: Decision) -> list[str] | None:
        """Apply the decision's settings; the names of the knobs that changed."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilerConfig:
    """What to profile and how long at each setting."""

    knob: Literal["power_limit", "sm_clocks"] = "power_limit"
    """Step through power limits (W) or locked SM clock ranges (MHz)."""
    power_limit_step_w: float = 25.0
    """Grid spacing of power limits between the GPU's min and max."""
    sm_clock_step_mhz: int = 150
    """Grid spacing of max SM clocks, downwards from the top clock."""
    min_sm_clock_mhz: int = 600
    """Lowest max-clock tried."""
    settle_steps: int = 1
    """Steps run but not measured after each change (the GPU settles)."""
    measure_steps: int = 3
    """Steps measured at each setting."""

    def __post_init__(self) -> None:
        if self.knob not in ("power_limit", "sm_clocks"):
            raise ConfigError(f"knob: {self.knob!r} is not 'power_limit' or 'sm_clocks'")
        if self.power_limit_step_w <= 0 or self.sm_clock_step_mhz <= 0:
            raise ConfigError("power_limit_step_w and sm_clock_step_mhz: must be > 0")
        if self.settle_steps < 0 or self.measure_steps < 1:
            raise ConfigError("settle_steps must be >= 0 and measure_steps >= 1")


def power_limit_grid(gpu: GPU, step_w: float) -> list[float]:
    """Max limit, then every multiple of ``step_w`` in [min, max), descending."""
    c = gpu.power_limit_constraints()
    grid = {float(c.max_w)}
    value = (c.max_w // step_w) * step_w
    while value >= c.min_w:
        grid.add(float(value))
        value -= step_w
    return sorted(grid, reverse=True)


def sm_clock_grid(gpu: GPU, step_mhz: int, floor_mhz: int) -> list[tuple[int, int]]:
    """Ranges (lowest clock, cap) with caps from the top clock down by ``step_mhz``, snapped to supported clocks."""
    supported = sorted(gpu.supported_sm_clocks_mhz(), reverse=True)
    if not supported:
        raise ConfigError(f"GPU {gpu.uuid}: no supported SM clocks reported; profile power limits instead")
    low = supported[-1]
    caps: list[int] = []
    target = supported[0]
    while target >= max(floor_mhz, low):
        cap = min(supported, key=lambda f: abs(f - target))
        if cap not in caps:
            caps.append(cap)
        target -= step_mhz
    return [(low, cap) for cap in caps]


def energy_optimal(points: Sequence[OperatingPoint]) -> OperatingPoint:
    """The point with the least energy per unit of progress (power / relative speed)."""
    if not points:
        raise ConfigError("energy_optimal: no operating points")
    return min(points, key=lambda p: p.power_w / p.relative_speed)


class OperatingPointProfiler:
    """Drives the warm-up sweep; call ``before_step``/``after_step`` around each training step."""

    def __init__(
        self,
        gpus: Sequence[GPU],
        actuators: Knobs,
        *,
        config: ProfilerConfig = ProfilerConfig(),
        fingerprint: str = "",
        cache: ProfileCache | None = None,
        collective: Collective | None = None,
        time_fn: Callable[[], float] = time.perf_counter,
        energy_fn: Callable[[], float] | None = None,
    ) -> None:
        if not gpus:
            raise ConfigError("OperatingPointProfiler: no GPUs to profile")
        self.gpus = list(gpus)
        self.config = config
        self._actuators = actuators
        self._cache = cache
        self._collective = collective or default_collective()
        self._time_fn = time_fn
        if energy_fn is None and not all(g.capabilities.energy_counter for g in self.gpus):
            raise ConfigError(
                "OperatingPointProfiler: a GPU has no energy counter; pass energy_fn= (e.g. the monitor's integrated energy)"
            )
        self._energy_fn = energy_fn or self._counter_energy_j
        lead = self.gpus[0]
        if config.knob == "power_limit":
            self.candidates: list[Any] = power_limit_grid(lead, config.power_limit_step_w)
        else:
            self.candidates = sm_clock_grid(lead, config.sm_clock_step_mhz, config.min_sm_clock_mhz)
        world = int(self._collective.all_reduce([1.0], "sum")[0])
        self._key = ProfileCache.key(lead.name, fingerprint, config.knob, self.candidates, world)
        self._index = -1  # -1: not started
        self._step_in_point = 0
        self._sums: list[list[float]] = [[0.0, 0.0] for _ in self.candidates]  # [time_s, energy_j] measured
        self._t0 = self._e0 = 0.0
        self._result: tuple[OperatingPoint, ...] | None = None
        self.from_cache = False
        self.aborted_reason: str | None = None

    # -- measurement -------------------------------------------------------------
    def _counter_energy_j(self) -> float:
        return sum(g.total_energy_j() for g in self.gpus)

    @property
    def done(self) -> bool:
        return self._result is not None

    @property
    def measuring(self) -> bool:
        """Whether the current step is a measured one."""
        return self._index >= 0 and self._result is None and self._step_in_point >= self.config.settle_steps

    def before_step(self) -> None:
        """Call right before a training step."""
        if self._result is not None:
            return
        if self._index < 0:
            if self._try_cache():
                return
            self._enter(0)
        if self.measuring:
            self._t0, self._e0 = self._time_fn(), self._energy_fn()

    def after_step(self) -> None:
        """Call right after a training step (after the device finished it, e.g. after a sync)."""
        if self._result is not None or self._index < 0:
            return
        if self.measuring:
            sums = self._sums[self._index]
            sums[0] += self._time_fn() - self._t0
            sums[1] += self._energy_fn() - self._e0
        self._step_in_point += 1
        if self._step_in_point >= self.config.settle_steps + self.config.measure_steps:
            if self._index + 1 < len(self.candidates):
                self._enter(self._index + 1)
            else:
                self._finish()

    def _try_cache(self) -> bool:
        cached = self._cache.load(self._key) if self._cache is not None and self._collective.rank == 0 else None
        cached = self._collective.broadcast(cached)  # rank 0's cache decides for all
        if cached:
            self._result, self.from_cache = tuple(cached), True
            log.info("operating points for %s from cache (%d points)", self._key["gpu_model"], len(cached))
            return True
        return False

    def _enter(self, index: int) -> None:
        self._index, self._step_in_point = index, 0
        target = self.candidates[index]
        decision = Decision(power_limit_w=target) if self.config.knob == "power_limit" else Decision(sm_clocks_mhz=target)
        try:
            applied = self._actuators.apply(decision) or []
        except GreentrainError as e:  # an ActuatorSet never raises; a bare callable might
            return self._abort(str(e))
        if self.config.knob == "power_limit":  # read back: an unchanged limit is not reported as applied
            off = [g.uuid for g in self.gpus if abs(g.power_limit_w() - target) > 0.5]
            if off:
                self._abort(f"power limit {target:g} W could not be set on {', '.join(off)}")
        elif "sm_clocks" not in applied:  # NVML cannot read a lock back; trust the actuators' report
            self._abort(f"SM clocks {target[0]}-{target[1]} MHz could not be locked")

    def _abort(self, reason: str) -> None:
        self.aborted_reason = reason
        self._result = ()
        log.warning("operating-point profiling stopped: %s; the job goes on at current settings", reason)

    def _finish(self) -> None:
        n = self.config.measure_steps
        times = self._collective.all_reduce([s[0] / n for s in self._sums], "max")  # the slowest rank sets the pace
        energies = self._collective.all_reduce([s[1] / n for s in self._sums], "sum")  # whole-job energy per step
        fastest_s = min(times)
        points = []
        for target, step_s, energy_j in zip(self.candidates, times, energies):
            knob = {"power_limit_w": target} if self.config.knob == "power_limit" else {"sm_clocks_mhz": target}
            points.append(OperatingPoint(relative_speed=fastest_s / step_s, power_w=energy_j / step_s, **knob))
        self._result = tuple(points)
        if self._cache is not None and self._collective.rank == 0:
            self._cache.store(self._key, self._result)
        self._actuators.apply(Decision(power_limit_w=self.candidates[0]) if self.config.knob == "power_limit"
                              else Decision(sm_clocks_mhz=self.candidates[0]))

    def result(self) -> tuple[OperatingPoint, ...]:
        """The measured points, highest setting first (empty if profiling was refused)."""
        if self._result is None:
            raise ConfigError("OperatingPointProfiler.result(): profiling is not finished; check .done first")
        return self._result
