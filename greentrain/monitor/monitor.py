"""The energy monitor: a background thread samples every device; windows and steps read it cheaply.

    with Monitor(devices.gpus, devices.cpus, interval_s=0.1) as monitor:
        for batch in loader:
            monitor.step_begin()
            train_step(batch)
            step = monitor.step_end()      # step.energy_j, step.duration_s, step.source

The sampler is a daemon thread (no subprocess, so no ``__main__`` guard).
It reads GPU power every pass and each GPU's expensive energy counter only
every ``anchor_interval_s`` and at window and job boundaries (see
``gpu_channel.py``), so 8 GPUs at 10 Hz cost well under 1 % of a core.
A device whose read raises is marked failed, reported once and frozen at
its last energy; the others keep being measured and training never sees the
exception. Every figure carries its ``Source``; a step shorter than twice
the counter's refresh period (0.2 s) is ``interpolated``: the hardware does
not resolve it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from greentrain.clock import Clock, SystemClock
from greentrain.device.base import GPU, CPUDomain
from greentrain.errors import ConfigError
from greentrain.monitor.channels import Channel, CPUChannel
from greentrain.monitor.gpu_channel import ANCHOR_INTERVAL_S, COUNTER_REFRESH_S, GPUChannel
from greentrain.monitor.readings import DeviceReading, StepEnergy, WindowEnergy, weakest_source
from greentrain.provenance import Source

if TYPE_CHECKING:
    from greentrain.device.discovery import DeviceSet
    from greentrain.events import EventLog

__all__ = ["Monitor", "validate_interval_s", "step_source"]

log = logging.getLogger("greentrain.monitor")
_Mark = tuple[float, dict[str, float]]


def validate_interval_s(value: object, name: str = "interval_s") -> float:
    """A finite number of seconds > 0, else ConfigError naming ``name``."""
    try:
        seconds = float(value)  # type: ignore[arg-type]  # any object: float() says whether it is a number
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {value!r} is not a number; give seconds > 0, e.g. 0.1") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{name}: must be a finite number of seconds > 0, got {value!r}; e.g. 0.1")
    return seconds


class Monitor:
    """Samples GPUs and CPU domains at ``interval_s``; energy windows, per-step attribution, cumulative counters.

    Args:
        gpus, cpus: devices to measure (e.g. from ``greentrain.device.discover()``).
        interval_s: sampling interval of the background thread.
        event_log: where to append ``sample`` events (one per device per pass).
        time_fn: monotonic seconds; inject a fake for tests and simulations.
        wall_clock: timestamps of events (default: system time).
        event_interval_s: write sample events at most this often (default: every pass).
        fresh_step_reads: read the energy counters at step boundaries too, where the
            last read is at least 0.2 s old (per-step energy to the counter's 100 ms
            resolution; 3.9 ms of CPU per GPU per read on an H100) instead of
            extending the last sample with its power (no device call, the default).
        anchor_interval_s: seconds between reads of one GPU's energy counter
            (the reads of several GPUs are staggered across passes). Windows
            and the job's start and end always read it.
    """

    stop_timeout_s = 5.0
    """How long ``stop`` waits for a sampling pass in progress (a hung driver call) before giving up."""

    def __init__(
        self,
        gpus: Sequence[GPU] = (),
        cpus: Sequence[CPUDomain] = (),
        *,
        interval_s: float = 0.1,
        event_log: EventLog | None = None,
        time_fn: Callable[[], float] = time.monotonic,
        wall_clock: Clock | None = None,
        event_interval_s: float | None = None,
        fresh_step_reads: bool = False,
        anchor_interval_s: float = ANCHOR_INTERVAL_S,
    ) -> None:
        self.interval_s = validate_interval_s(interval_s)
        self.anchor_interval_s = validate_interval_s(anchor_interval_s, "anchor_interval_s")
        self.event_interval_s = (
            None if event_interval_s is None else validate_interval_s(event_interval_s, "event_interval_s")
        )
        staggered = [self.anchor_interval_s * (k + 1) / len(gpus) for k in range(len(gpus))]
        self._channels: list[Channel] = [GPUChannel(g, self.anchor_interval_s, first_s)
                                         for g, first_s in zip(gpus, staggered, strict=True)]  # fmt: skip
        self._channels += [CPUChannel(c) for c in cpus]
        keys = [c.key for c in self._channels]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ConfigError(f"devices: {', '.join(duplicates)} given more than once; pass each device once")
        self.fresh_step_reads = fresh_step_reads
        self._event_log = event_log
        self._time_fn = time_fn
        self._wall_clock = wall_clock or SystemClock()
        self._lock = threading.Lock()
        # One pass at a time (trapezoid state is read-modify-write); re-entrant so a boundary can read its
        # figures in the same hold as its counter reads.
        self._sample_lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False
        self._t0 = 0.0
        self._t_end: float | None = None
        self._windows: dict[str, _Mark] = {}
        self._step_start: _Mark | None = None
        self._last_step_end: _Mark | None = None
        self._steps = 0
        self._last_event_t: float | None = None

    @classmethod
    def from_devices(cls, devices: DeviceSet, **kwargs: Any) -> Monitor:
        """A monitor over everything in a ``DeviceSet`` from ``greentrain.device.discover``."""
        return cls(devices.gpus, devices.cpus, **kwargs)

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def notes(self) -> list[str]:
        """Why figures may be missing: no devices, failed devices."""
        out = [] if self._channels else ["no devices to measure: every energy figure is 0 J"]
        out += [f"{c.key} failed and is no longer measured: {c.error}" for c in self._channels if c.failed]
        return out + [note for c in self._channels for note in c.notes()]

    def start(self, background: bool = True) -> Monitor:
        """Take baselines and start the sampler thread (no-op if already started).

        ``background=False`` starts no thread: the caller drives ``sample()``
        (simulations, tests with an injected clock).
        """
        if self._started:
            return self
        self._t0 = self._time_fn()
        for channel in self._channels:
            try:
                channel.open(self._t0)
            except Exception as e:
                self._fail(channel, e)
        self._started = True
        self._stop.clear()
        if self._channels and background:
            self._thread = threading.Thread(target=self._run, name="greentrain-monitor", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the sampler, take a last sample and freeze every figure (idempotent)."""
        if not self._started or self._t_end is not None:
            return
        self._stop.set()
        hung = False
        if self._thread is not None:
            self._thread.join(timeout=max(self.stop_timeout_s, 5 * self.interval_s))
            hung = self._thread.is_alive()
            self._thread = None
        if hung:  # a vendor call that never returns; it is a daemon thread, so exit is not blocked
            log.warning("greentrain monitor: a device read hangs; figures frozen at the last completed sample")
            self._t_end = self._time_fn()
        else:
            self._t_end = self._sample(anchor=True)  # the job's end: every total ends on a counter read
            if self._last_event_t != self._t_end:  # sample events at most every event_interval_s: the last always
                self._log_events(self._t_end, [c for c in self._channels if not c.failed])
        for channel in self._channels:
            channel.stopped = True

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        next_t = time.monotonic()
        while True:
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind (a slow read): skip ahead instead of bursting
                next_t, delay = time.monotonic(), 0.0
            if self._stop.wait(delay):
                return
            self.sample()

    # --- sampling -----------------------------------------------------------------------------

    def _fail(self, channel: Channel, error: BaseException) -> None:
        channel.fail(error)
        log.warning("greentrain monitor: %s failed and is no longer measured: %s", channel.key, channel.error)
        self._log_events(self._time_fn(), [channel], force=True)

    def sample(self) -> None:
        """One sampling pass over all devices (the thread calls this; tests may too). Never raises."""
        self._sample(anchor=False)

    def _sample(self, anchor: bool, min_anchor_gap_s: float = 0.0) -> float:
        """A pass at monitor time t (returned); ``anchor`` reads every energy counter too (window and job
        boundaries), except those read less than ``min_anchor_gap_s`` ago."""
        with self._sample_lock:
            t = self._time_fn()
            for channel in self._channels:
                if channel.failed or channel.stopped:
                    continue
                try:
                    channel.sample(t, anchor, min_anchor_gap_s)
                except Exception as e:
                    self._fail(channel, e)
            last = self._last_event_t
            if self.event_interval_s is None or last is None or t - last >= self.event_interval_s:
                self._log_events(t, [c for c in self._channels if not c.failed])
        return t

    def _log_events(self, t: float, channels: list[Channel], force: bool = False) -> None:
        if self._event_log is None or not channels:
            return
        if not force:
            self._last_event_t = t
        try:
            now = self._wall_clock.now()
            for r in (c.reading() for c in channels):
                extra = {"failed": True, "error": r.error} if r.failed else {}
                self._event_log.write(
                    "sample", now, device=r.name, kind=r.kind, index=r.index, uuid=r.uuid,
                    power_w=r.power_w, energy_j=r.energy_j, source=r.source, **extra,
                )  # fmt: skip
        except Exception as e:  # a full disk must not stop measurement
            log.warning("greentrain monitor: event log disabled: %s", e)
            self._event_log = None

    # --- figures ------------------------------------------------------------------------------

    def _now(self) -> float:
        return self._t_end if self._t_end is not None else self._time_fn()

    def _mark(self, anchor: bool = False, exact: bool = False) -> _Mark:
        """Figures now; ``anchor`` reads the counters first; ``exact`` takes them as they are (windows)
        rather than never below what was handed out before (steps)."""
        if not self._started:
            raise ConfigError("Monitor is not started: call start() or use `with Monitor(...) as monitor:`")
        if anchor and self._t_end is None:
            with self._sample_lock:
                # Windows always read; a step boundary within two refreshes of the last read would often see
                # the same value (a 0 J step), so it keeps the estimate instead. The figures are those at the
                # pass's time: the reads themselves take a while (3.9 ms per GPU on an H100).
                t = self._sample(anchor=True, min_anchor_gap_s=0.0 if exact else 2 * COUNTER_REFRESH_S)
                return t, {c.key: c.energy_at(t, exact=exact) for c in self._channels}
        t = self._now()
        return t, {c.key: c.energy_at(t, exact=exact) for c in self._channels}

    def _source(self) -> Source:
        return weakest_source(c.source for c in self._channels)

    def _between(self, start: _Mark, end: _Mark) -> tuple[float, float, dict[str, float]]:
        per_device_j = {k: max(0.0, e - start[1].get(k, 0.0)) for k, e in end[1].items()}
        return max(0.0, end[0] - start[0]), sum(per_device_j.values()), per_device_j

    def begin(self, name: str) -> None:
        """Open the energy window ``name`` (windows nest; names must be distinct while open).

        Reads every energy counter (3.9 ms of CPU per GPU on an H100), so the window is exact to them.
        """
        mark = self._mark(anchor=True, exact=True)
        with self._lock:
            if name in self._windows:
                raise ConfigError(f"window {name!r} is already open; end it first or use another name")
            self._windows[name] = mark

    def end(self, name: str) -> WindowEnergy:
        """Close the window ``name`` and return its energy (reads every energy counter, as ``begin``)."""
        mark = self._mark(anchor=True, exact=True)
        with self._lock:
            start = self._windows.pop(name, None)
            if start is None:
                open_names = ", ".join(map(repr, self._windows)) or "none"
                raise ConfigError(f"window {name!r} was never begun (open windows: {open_names})")
        duration_s, energy_j, per_device_j = self._between(start, mark)
        return WindowEnergy(name, duration_s, energy_j, per_device_j, self._source())

    def step_begin(self) -> None:
        """Mark the start of a training step."""
        mark = self._mark(anchor=self.fresh_step_reads)
        with self._lock:
            self._step_start = mark

    def step_end(self) -> StepEnergy:
        """End the step; without ``step_begin`` it starts where the previous step ended (steps tile time).

        A step shorter than twice the counter's refresh period is labelled ``interpolated``.
        """
        mark = self._mark(anchor=self.fresh_step_reads)
        with self._lock:
            start = self._step_start or self._last_step_end or (self._t0, {})
            self._step_start, self._last_step_end = None, mark
            self._steps += 1
            step = self._steps
        duration_s, energy_j, per_device_j = self._between(start, mark)
        return StepEnergy(step, duration_s, energy_j, per_device_j, step_source(self._source(), duration_s))

    def readings(self) -> list[DeviceReading]:
        """Per-device cumulative figures since start (for exporters and the CLI)."""
        return [c.reading() for c in self._channels]

    def total_energy_j(self) -> float:
        """Whole-job energy since start, all devices."""
        if not self._started:
            return 0.0
        return sum(self._mark()[1].values())

    def power_w(self) -> float:
        """Current whole-job draw (last sample of each working device)."""
        return sum(p for c in self._channels if (p := c.power_w()) is not None)

    def held_energy_j(self) -> float:
        """Energy since start of the devices a paused job keeps allocated: its GPUs. Host CPUs are not
        counted: they stay powered whatever the job does, and a waiting process adds nothing to them."""
        if not self._started:
            return 0.0
        held = {c.key for c in self._channels if c.kind == "gpu"}
        return sum(e for k, e in self._mark()[1].items() if k in held)

    def held_power_w(self) -> float:
        """Current draw of the held devices (GPUs): what a pause would cost now, before one is measured."""
        return sum(p for c in self._channels if c.kind == "gpu" and (p := c.power_w()) is not None)

    def elapsed_s(self) -> float:
        """Seconds of monitor time since start (frozen at stop)."""
        return max(0.0, self._now() - self._t0) if self._started else 0.0

    def source(self) -> Source:
        """The weakest label among the devices (what a whole-job total can claim)."""
        return self._source()

    def sampler_cpu_s(self) -> float | None:
        """CPU seconds the sampler thread has used so far (None: no thread, or no per-thread clock here)."""
        thread = self._thread
        clock_id = getattr(time, "pthread_getcpuclockid", None)
        if thread is None or thread.ident is None or clock_id is None:
            return None
        try:
            return time.clock_gettime(clock_id(thread.ident))
        except OSError:  # the thread has just exited
            return None


def step_source(device_source: Source, duration_s: float) -> Source:
    """A step's label: ``interpolated`` when it is shorter than two counter refreshes (0.2 s)."""
    if duration_s < 2 * COUNTER_REFRESH_S and device_source in (Source.MEASURED, Source.INTEGRATED):
        return Source.INTERPOLATED
    return device_source
