"""Glue between a Session's step boundaries and the hardware knobs: power limits, clocks, precision.

``build_hardware`` decides from the policy, the GPUs and the user's switches
whether this job profiles operating points and/or trials precisions, and
builds the journaled ``ActuatorSet``, the ``OperatingPointProfiler`` and the
``PrecisionController``. ``JobHardware`` is then driven at each step boundary:
the profiler brackets each step (``after_step`` at a boundary, ``before_step``
right after it), and when its sweep is done the measured points go to
``engine.set_operating_points`` so the policy's power decisions flow through
the engine and its actuators like every other decision. Profiling steps are
ordinary training steps: nothing is lost. A refused knob (no privilege)
leaves the job measuring at current settings, timing-only, with one note.
In advisory mode (``actuation="advise"``) the actuators only advise, no
sweep runs (points come from the profile cache or an estimate) and no
precision is trialled: nothing is written to the hardware.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from greentrain.clock import Clock, ReplayClock, SystemClock
from greentrain.device.base import GPU
from greentrain.engine import Engine
from greentrain.engine.collaborators import Actuators, Advises, Closable, EnergyMonitor, HoldsPrecision, NoMonitor
from greentrain.job.options import PowerSwitch

if TYPE_CHECKING:
    from torch.nn import Module

    from greentrain.device.discovery import DeviceSet
    from greentrain.engine.collaborators import Loss
    from greentrain.precision import PrecisionController
    from greentrain.profiler import OperatingPointProfiler
    from greentrain.profiler.estimate import AdvisoryPoints
from greentrain.policies.base import Policy

__all__ = ["JobHardware", "build_hardware", "discover_devices", "policy_uses_power"]

log = logging.getLogger("greentrain.session")

CacheDir = str | Path | Literal[False] | None
"""Where measured operating points are cached (None: the default folder; False: no cache)."""


def policy_uses_power(policy: Policy) -> bool:
    """Whether ``policy`` chooses power limits from ``Snapshot.operating_points`` (its ``power_use``)."""
    return policy.power_use != "none"


@dataclass
class JobHardware:
    """What a job drives at its step boundaries, under Session or a framework callback (each part optional)."""

    actuators: Actuators | None = None
    """The ``ActuatorSet`` the engine applies decisions through (built here or the user's)."""
    profiler: OperatingPointProfiler | None = None
    """The ``OperatingPointProfiler`` sweeping power limits during warm-up, or None."""
    precision: PrecisionController | None = None
    """The ``PrecisionController``, or None."""
    owns_actuators: bool = False
    """Built here: closed (restore + release locks + remove exit hooks) when the session closes."""
    notes: list[str] = field(default_factory=list)
    """Why power control is off, where it was wanted (passed to the engine's notes)."""
    advisory_points: AdvisoryPoints | None = None
    """Advisory mode: the ``AdvisoryPoints`` published to the engine at ``start`` (no sweep)."""
    _points_sent: bool = field(default=False, init=False, repr=False)
    _loss_noted: bool = field(default=False, init=False, repr=False)

    def start(self, engine: Engine) -> None:
        """At ``__enter__`` after the first ``step_begin``: bracket the first step."""
        for note in self.notes:
            engine.note(note)
        if self.advisory_points is not None:
            self._publish_advisory(engine, self.advisory_points)
        self._before_step(engine)

    def step_end(self, engine: Engine, loss: Loss) -> None:
        """At a step boundary, after ``engine.step_end``: feed the profiler, then the precision trial."""
        self._drive_profiler(engine, "after_step")
        if self.precision is None or not self._profiling_done() or _advises(self.actuators):
            return  # a precision trial during the power sweep would measure the sweep, not the precision
        if loss is None:
            if not self._loss_noted:
                self._loss_noted = True
                engine.note("precision: pass loss= to session.step() so precisions can be trialled and guarded")
            return
        progress = engine.progress
        energy_j = progress.last_step_energy_j
        switched = engine.guarded("precision.on_step_end", self.precision.on_step_end, loss,
                                  energy_j if energy_j else None, progress.last_step_s or 0.0)
        if switched is not None:
            engine.io.job_stats.update(precision=switched)
            engine.event("precision", precision=switched, step=progress.steps_done)

    def step_begin(self, engine: Engine) -> None:
        """Right after ``engine.step_begin``: the next step is bracketed by the profiler."""
        self._before_step(engine)

    def close(self) -> None:
        """Restore every knob, release the device locks, remove exit hooks (only what was built here)."""
        if self.owns_actuators and isinstance(self.actuators, Closable):  # built here: an ActuatorSet or advisory
            self.actuators.close()

    # -- internals ---------------------------------------------------------------------------------

    def _profiling_done(self) -> bool:
        return self.profiler is None or self._points_sent

    def _before_step(self, engine: Engine) -> None:
        self._drive_profiler(engine, "before_step")  # a cached profile is done before any step

    def _drive_profiler(self, engine: Engine, method: Literal["before_step", "after_step"]) -> None:
        profiler = self.profiler
        if profiler is None or self._points_sent:
            return
        try:
            (profiler.before_step if method == "before_step" else profiler.after_step)()
        except Exception as e:  # a profiler fault must not stop training: give up profiling, once
            self._points_sent = True
            engine.note(f"power control off: profiler.{method} failed ({type(e).__name__}: {e}); "
                         "the job goes on timing-only at current settings")
            return
        self._publish(engine, profiler)

    def _publish_advisory(self, engine: Engine, found: AdvisoryPoints) -> None:
        from greentrain.actuators.advisory import AdvisoryActuators

        if not found.points:
            engine.note(f"advisory mode: no operating points ({found.note}); power-limit advice needs them")
            return
        if isinstance(self.actuators, AdvisoryActuators):  # always, where advisory points were found
            self.actuators.points_source = found.source
        engine.event("operating_points", source=found.source, note=found.note,
                      points=[{"power_limit_w": p.power_limit_w, "relative_speed": p.relative_speed,
                               "power_w": p.power_w} for p in found.points])
        engine.set_operating_points(found.points)

    def _publish(self, engine: Engine, profiler: OperatingPointProfiler) -> None:
        if not profiler.done:
            return
        self._points_sent = True
        points = profiler.result()
        if not points:
            reason = profiler.aborted_reason or "no points measured"
            engine.note(f"power control off: {reason}; the job goes on timing-only at current settings")
            return
        source = "cache" if profiler.from_cache else "measured"
        engine.event("operating_points", source=source,
                      points=[{"power_limit_w": p.power_limit_w, "sm_clocks_mhz": p.sm_clocks_mhz,
                               "relative_speed": p.relative_speed, "power_w": p.power_w} for p in points])
        engine.set_operating_points(points)


def build_hardware(
    policy: Policy,
    gpus: Sequence[GPU],
    *,
    power: PowerSwitch,
    precision: Sequence[str] | None,
    actuators: Actuators | None,
    profile_cache_dir: CacheDir,
    state_dir: str | Path | None,
    job: str,
    clock: Clock,
    model: Module | None = None,
    monitor: EnergyMonitor | None = None,
    actuation: str = "apply",
) -> JobHardware:
    """Build the actuators, profiler and precision controller this job's switches ask for."""
    hw = JobHardware(actuators=actuators)
    if precision is not None:
        hw.precision = _build_precision(precision)
    controllable = [g for g in gpus if _can_limit_power(g)]
    wanted = power is True or (power == "auto" and policy_uses_power(policy))
    if wanted and not controllable:
        if power is True or gpus:
            hw.notes.append("power control off: no GPU with power-limit control; the job goes on timing-only")
        wanted = False
    if actuation == "advise":
        return _advisory_hardware(hw, controllable if wanted else [], profile_cache_dir, model)
    if hw.actuators is None and (wanted or hw.precision is not None):
        from greentrain.actuators import ActuatorSet

        hw.actuators = ActuatorSet(controllable if wanted else [], state_dir=state_dir, job=job,
                                   precision=hw.precision, install_hooks=wanted)
        hw.owns_actuators = True
    elif hw.precision is not None and isinstance(hw.actuators, HoldsPrecision) and hw.actuators.precision is None:
        hw.actuators.precision = hw.precision  # policy Decision.precision reaches the controller
    if wanted:
        hw.profiler = _build_profiler(hw, controllable, profile_cache_dir, clock, model, monitor)
    return hw


def _advisory_hardware(hw: JobHardware, gpus: list[GPU], cache_dir: CacheDir, model: Module | None) -> JobHardware:
    """Advisory actuators over ``gpus`` (never a setter call) and points from the cache or an estimate."""
    from greentrain.actuators.actuator_set import ActuatorSet
    from greentrain.actuators.advisory import AdvisoryActuators

    given = hw.actuators
    if given is not None:
        hw.notes.append("advisory mode: the actuators passed in are not used; decisions are advised, not applied")
    given_gpus = list(given.gpus) if isinstance(given, ActuatorSet | AdvisoryActuators) else []
    advised = gpus or given_gpus  # no devices of its own: advise over the given GPUs
    given_precision = given.precision if isinstance(given, HoldsPrecision) else None
    hw.actuators = AdvisoryActuators(advised, precision=hw.precision or given_precision)
    hw.owns_actuators = True
    if hw.precision is not None:
        hw.notes.append("advisory mode: precision stays at the reference (a trial would switch it); "
                        "the policy's precision decisions are advised")
    if gpus:
        from greentrain.profiler import ProfileCache, workload_fingerprint
        from greentrain.profiler.estimate import advisory_points

        cache = None if cache_dir is False else ProfileCache(cache_dir)
        hw.advisory_points = advisory_points(gpus, fingerprint=workload_fingerprint(model), cache=cache)
    return hw


def _advises(actuators: Actuators | None) -> bool:
    """Whether ``actuators`` only advise (``AdvisoryActuators``)."""
    return isinstance(actuators, Advises) and actuators.advisory


def discover_devices() -> DeviceSet | None:
    """``greentrain.device.discover()``, or None when discovery fails (a timing-only job, not an error)."""
    try:
        from greentrain.device import discover

        return discover()
    except Exception as e:
        log.info("greentrain: device discovery failed (%s: %s); no power control", type(e).__name__, e)
        return None


def _can_limit_power(gpu: GPU) -> bool:
    try:
        return bool(gpu.capabilities.power_limit_control)
    except Exception:  # a GPU that stopped answering is simply not controllable
        return False


def _build_precision(allowed: Sequence[str]) -> PrecisionController:
    import torch

    from greentrain.precision import PrecisionController

    device_type = "cuda" if torch.cuda.is_available() else "cpu"  # where the model's forward runs
    return PrecisionController(tuple(allowed), device_type=device_type)


def _build_profiler(hw: JobHardware, gpus: list[GPU], cache_dir: CacheDir, clock: Clock, model: Module | None,
                    monitor: EnergyMonitor | None) -> OperatingPointProfiler | None:
    from greentrain.profiler import (
        OperatingPointProfiler,
        ProfileCache,
        workload_fingerprint,
    )

    energy_fn: Callable[[], float] | None = None
    if not all(g.capabilities.energy_counter for g in gpus):
        if monitor is None or isinstance(monitor, NoMonitor) or not callable(monitor.total_energy_j):
            hw.notes.append("power control off: no GPU energy counter and no monitor to integrate power; "
                            "the job goes on timing-only")
            return None
        # integrated power: coarser, still comparable across limits; a monitor that measures has a total
        energy_fn = cast("Callable[[], float]", monitor.total_energy_j)
    cache = None if cache_dir is False else ProfileCache(cache_dir)
    assert hw.actuators is not None  # made (or given) whenever power control is wanted
    return OperatingPointProfiler(gpus, hw.actuators, fingerprint=workload_fingerprint(model),
                                  cache=cache, time_fn=_time_fn(clock), energy_fn=energy_fn)


def _time_fn(clock: Clock) -> Callable[[], float]:
    """Seconds for step timing: real time for real clocks (energy counters count real joules, so watts
    come out true even under a replay speed-up); a hand-driven clock's own time in simulations, where
    the simulated devices follow that clock too."""
    if isinstance(clock, SystemClock | ReplayClock):
        return time.perf_counter
    return lambda: clock.now().timestamp()
