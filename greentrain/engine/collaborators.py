"""What the engine drives and reports to: small declared protocols, the null objects that stand for an
absent one, and the bundle an engine is given.

The engine calls nothing else on them, so anything with these methods will
do: the real ``SignalChain``, ``Monitor`` and ``ActuatorSet``, the advisory
actuators, the simulator's replayed signal, a test double. Optional extras
(a source's ``history``, a monitor's ``held_power_w``, the actuators'
``at_step_boundary``, advisory actuators' ``advise``...) are their own small
protocols, tested with ``isinstance`` where they are used: an object without
them still does, and the engine does without the extra.

An absent monitor or run log is an object that does nothing (``NoMonitor``,
``greentrain.events.NoEventLog``), as Zeus stands a null object where a device
is missing, so no caller branches on ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

from greentrain.clock import Clock, SystemClock
from greentrain.engine.broadcast import Broadcast, LocalBroadcast
from greentrain.events import EventLog, NoEventLog
from greentrain.jobstats import JobStats
from greentrain.monitor.readings import DeviceReading, StepEnergy
from greentrain.policies.base import Decision
from greentrain.signals.base import IntensityPoint, ProviderStatus

if TYPE_CHECKING:
    from torch import Tensor

    from greentrain.actuators.actuator_set import PrecisionTarget

__all__ = ["CarbonSignal", "KeepsHistory", "OfflineFallback", "UsesNetwork", "EnergyMonitor", "HoldsDevices",
           "ReportsReadings", "Closable", "HoldsPrecision", "Actuators", "Recovers", "StepBoundary", "CountsRefusals",
           "Advises", "NoMonitor", "Collaborators", "Loss"]

Loss: TypeAlias = "Tensor | float | None"
"""A step's training loss as the loop hands it over: a tensor (read off the device only when logged), a
number, or None."""


@runtime_checkable
class CarbonSignal(Protocol):
    """A zone's carbon intensity: the latest value, a forecast, and how fresh the source is."""

    def latest(self) -> IntensityPoint:
        """The current intensity (may raise: the engine falls back and says so)."""
        ...

    def forecast(self, horizon_h: int = 72) -> list[IntensityPoint]:
        """Hourly points from now on, up to ``horizon_h`` hours."""
        ...

    def status(self) -> ProviderStatus | None:
        """Which provider answered and how stale it is."""
        ...


@runtime_checkable
class KeepsHistory(Protocol):
    """A carbon source that keeps past actual values (a relaunch prices the hours before it with them)."""

    def history(self, start: datetime, end: datetime) -> Iterable[IntensityPoint]:
        """Actual points of [start, end)."""
        ...


@runtime_checkable
class OfflineFallback(Protocol):
    """A carbon source with a value that needs no network (a static or CSV provider behind a live one)."""

    def offline_latest(self) -> IntensityPoint | None:
        """The current intensity from the offline providers alone; None: there is none."""
        ...


@runtime_checkable
class UsesNetwork(Protocol):
    """A carbon source that says whether reading it may wait on the network (the engine then reads it off
    the training thread)."""

    @property
    def uses_network(self) -> bool:
        """True: a read may block on I/O."""
        ...


@runtime_checkable
class EnergyMonitor(Protocol):
    """Energy per training step and the current draw of the job's devices."""

    def step_begin(self) -> None:
        """Mark the start of a step."""
        ...

    def step_end(self) -> StepEnergy | None:
        """Energy of the step since ``step_begin`` (``energy_j`` and its ``source``); None: not measured."""
        ...

    def power_w(self) -> float | None:
        """Current draw of every measured device, watts."""
        ...

    def total_energy_j(self) -> float | None:
        """Energy since the monitor started, joules."""
        ...


@runtime_checkable
class HoldsDevices(Protocol):
    """A monitor that tells the devices a pause holds (a ``Monitor``'s GPUs) from the whole job's draw."""

    def held_power_w(self) -> float | None:
        """Current draw of the held devices, watts."""
        ...

    def held_energy_j(self) -> float | None:
        """Energy of the held devices since the monitor started, joules."""
        ...


@runtime_checkable
class ReportsReadings(Protocol):
    """A monitor that reports each device's figures (the summary's energy sources, the exporter's gauges)."""

    def readings(self) -> Sequence[DeviceReading]:
        """One reading per device, now."""
        ...


@runtime_checkable
class Actuators(Protocol):
    """Hardware knobs behind a decision: applied, and restored on every exit path."""

    def apply(self, decision: Decision) -> list[str]:
        """Apply the decision's settings; the names of the knobs that changed. Never raises."""
        ...

    def restore_all(self) -> list[str]:
        """Put every changed setting back; the failures (also logged)."""
        ...


@runtime_checkable
class Recovers(Protocol):
    """Actuators that restore what a killed predecessor left on the devices (from its journal) at start."""

    def recover(self) -> int:
        """Settings put back."""
        ...


@runtime_checkable
class StepBoundary(Protocol):
    """Actuators with work deferred to a step boundary (an exit signal's restore never runs in the handler)."""

    def at_step_boundary(self) -> None:
        """Run what waits for the safe point between steps."""
        ...


@runtime_checkable
class CountsRefusals(Protocol):
    """Actuators that count refused changes and settings left unrestored (the exporter's alerts)."""

    @property
    def refused_total(self) -> Mapping[str, int]:
        """Refused changes per knob."""
        ...

    def unrestored_count(self) -> int:
        """Settings changed and not yet put back."""
        ...


@runtime_checkable
class Advises(Protocol):
    """Actuators that only advise (``AdvisoryActuators``): a decision's knobs are logged, never applied."""

    @property
    def advisory(self) -> bool:
        """True while advising only."""
        ...

    @property
    def history(self) -> Sequence[dict[str, object]]:
        """Each distinct advice given, in order."""
        ...

    @property
    def points_source(self) -> str | None:
        """Where the operating points behind an estimate came from (None: measured)."""
        ...

    def advise(self, decision: Decision) -> dict[str, object]:
        """The advice for ``decision`` (recorded in ``history`` when new)."""
        ...


@runtime_checkable
class Closable(Protocol):
    """Actuators (or a source) with resources to give back: restore, release locks, remove exit hooks."""

    def close(self) -> None:
        """Give everything back."""
        ...


@runtime_checkable
class HoldsPrecision(Protocol):
    """Actuators that switch precision through a controller they hold (``ActuatorSet``)."""

    precision: PrecisionTarget | None
    """The controller a decision's precision is requested from (None: none yet)."""


class NoMonitor:
    """Stands where nothing measures the job (``devices=False``, or no monitor could start): steps cost no
    measured energy, and the job's energy is unknown rather than 0 J (``measures`` is False)."""

    measures = False
    """Whether this monitor measures energy (a real ``Monitor`` does)."""

    def step_begin(self) -> None:
        """Nothing to mark."""

    def step_end(self) -> None:
        """Nothing measured."""

    def power_w(self) -> None:
        """No draw known."""

    def held_power_w(self) -> None:
        """No draw known."""

    def total_energy_j(self) -> None:
        """No energy known."""

    def held_energy_j(self) -> None:
        """No energy known."""

    def readings(self) -> list[DeviceReading]:
        """No device readings (the exporter publishes none)."""
        return []

    def stop(self) -> None:
        """Nothing to stop."""


@dataclass(kw_only=True)
class Collaborators:
    """The objects one engine drives and reports to; an absent one is its null object."""

    clock: Clock = field(default_factory=SystemClock)
    """The job clock (``ReplayClock`` for demos and tests)."""
    signals: CarbonSignal | None = None
    """The carbon source (a ``SignalChain``); None: the job runs now and its emissions are not priced."""
    monitor: EnergyMonitor = field(default_factory=NoMonitor)
    """Energy per step (a started ``greentrain.monitor.Monitor``)."""
    actuators: Actuators | None = None
    """The hardware knobs a decision may set (an ``ActuatorSet``), or None: no knob is set."""
    event_log: EventLog = field(default_factory=NoEventLog)
    """The JSONL run log."""
    broadcast: Broadcast = field(default_factory=LocalBroadcast)
    """Rank 0's decisions to every rank (``TorchBroadcast``); one process by default."""
    job_stats: JobStats = field(default_factory=JobStats)
    """The live totals exporters read."""
