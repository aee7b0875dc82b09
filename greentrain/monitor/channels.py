"""One channel per device: turns raw reads into cumulative energy since the monitor started.

A GPU with an energy counter and a RAPL zone are ``measured``: the sampler
reads the counter. A GPU without a counter is ``integrated``: the sampler
integrates power with the trapezoid rule. Between samples ``energy_at``
extends the last sample with the last power, so step attribution makes no
device call on the training thread (with ``fresh=True`` it reads counters
directly instead: exact per step, one vendor call per device per boundary).
``energy_at`` never goes backwards and never raises.
"""

from __future__ import annotations

import threading
from typing import Any

from greentrain.device.base import GPU, CPUDomain
from greentrain.errors import NotSupportedError
from greentrain.monitor.readings import DeviceReading
from greentrain.provenance import Source

__all__ = ["Channel", "GPUChannel", "CPUChannel", "EXTRAS_INTERVAL_S"]

EXTRAS_INTERVAL_S = 1.0
"""How often a GPU's power limit and SM clock are re-read (energy and power: every sample)."""


class Channel:
    """Shared state and bookkeeping; subclasses implement ``open`` and ``_read``."""

    kind: str = "gpu"

    def __init__(self, key: str, index: int | None, uuid: str | None, model: str | None, source: Source) -> None:
        self.key, self.index, self.uuid, self.model, self.source = key, index, uuid, model, source
        self.failed = False
        self.error: str | None = None
        self.stopped = False
        self._lock = threading.Lock()
        self._energy_j = 0.0
        self._t = 0.0
        self._power_w: float | None = None
        self._floor_j = 0.0  # largest value handed out, so energy never goes backwards
        self.power_limit_w: float | None = None
        self.sm_clock_hz: float | None = None

    def open(self, t: float) -> None:
        """Take the baseline at monitor start (may raise: the monitor then marks the channel failed)."""
        raise NotImplementedError

    def sample(self, t: float) -> None:
        """One sampler pass (may raise)."""
        raise NotImplementedError

    def fresh_energy_j(self) -> float | None:
        """A direct counter read for step attribution, or None when the channel interpolates."""
        return None

    def fail(self, error: BaseException) -> None:
        with self._lock:
            self.failed = True
            self.error = str(error).splitlines()[0] if str(error) else type(error).__name__

    def _store(self, t: float, energy_j: float, power_w: float | None) -> None:
        with self._lock:
            self._energy_j, self._t = energy_j, t
            if power_w is not None:
                self._power_w = power_w
            self._floor_j = max(self._floor_j, energy_j)

    def energy_at(self, t: float, fresh: bool = False) -> float:
        """Cumulative energy at monitor time ``t``; monotonic, never raises; ``fresh`` reads counters."""
        if fresh and not (self.failed or self.stopped):
            try:
                direct_j = self.fresh_energy_j()
            except Exception:  # the sampler will notice and report it; attribution goes on
                direct_j = None
        else:
            direct_j = None
        with self._lock:
            if direct_j is None:
                direct_j = self._energy_j
                if not (self.failed or self.stopped) and self._power_w is not None:
                    direct_j += self._power_w * max(0.0, t - self._t)
            self._floor_j = max(self._floor_j, direct_j)
            return self._floor_j

    def power_w(self) -> float | None:
        with self._lock:
            return None if self.failed else self._power_w

    def reading(self) -> DeviceReading:
        with self._lock:
            return DeviceReading(
                kind=self.kind,  # type: ignore[arg-type]
                name=self.key,
                index=self.index,
                uuid=self.uuid,
                energy_j=max(self._floor_j, self._energy_j),
                power_w=None if self.failed else self._power_w,
                power_limit_w=self.power_limit_w,
                sm_clock_hz=self.sm_clock_hz,
                source=self.source,
                failed=self.failed,
                error=self.error,
                model=self.model,
            )


def _optional(read: Any) -> Any:
    """A secondary figure (limit, clock): None when unsupported; a lost device still raises."""
    try:
        return read()
    except NotSupportedError:
        return None


class GPUChannel(Channel):
    """A GPU: counter (measured) or trapezoid-integrated power samples (integrated)."""

    kind = "gpu"

    def __init__(self, gpu: GPU) -> None:
        super().__init__(f"gpu{gpu.index}", gpu.index, gpu.uuid, gpu.name, Source.MEASURED)
        self.gpu = gpu
        self._counter = False
        self._has_power = False
        self._baseline_j = 0.0
        self._extras_t: float | None = None

    def open(self, t: float) -> None:
        caps = self.gpu.capabilities
        self._counter, self._has_power = caps.energy_counter, caps.power_reading
        if not (self._counter or self._has_power):
            raise NotSupportedError(f"{self.key}: neither an energy counter nor a power reading; cannot measure it")
        self.source = Source.MEASURED if self._counter else Source.INTEGRATED
        self._baseline_j = self.gpu.total_energy_j() if self._counter else 0.0
        self._t = t
        self._read_extras(t)
        self._store(t, 0.0, self.gpu.power_w() if self._has_power else None)

    def _read_extras(self, t: float) -> None:
        # Limit and clock change only at step boundaries; once a second is fresh enough for gauges.
        if self._extras_t is not None and t - self._extras_t < EXTRAS_INTERVAL_S:
            return
        self._extras_t = t
        self.power_limit_w = _optional(self.gpu.power_limit_w)
        clock_mhz = _optional(self.gpu.sm_clock_mhz)
        self.sm_clock_hz = None if clock_mhz is None else clock_mhz * 1e6

    def fresh_energy_j(self) -> float | None:
        return self.gpu.total_energy_j() - self._baseline_j if self._counter else None

    def sample(self, t: float) -> None:
        power_w = self.gpu.power_w() if self._has_power else None
        with self._lock:
            prev_e, prev_t, prev_p = self._energy_j, self._t, self._power_w
        if self._counter:
            energy_j = self.gpu.total_energy_j() - self._baseline_j
            if power_w is None and t > prev_t:
                power_w = (energy_j - prev_e) / (t - prev_t)
        else:
            assert power_w is not None
            energy_j = prev_e + 0.5 * ((prev_p if prev_p is not None else power_w) + power_w) * max(0.0, t - prev_t)
        self._read_extras(t)
        self._store(t, energy_j, power_w)


class CPUChannel(Channel):
    """A CPU energy domain (RAPL zone, estimate or fake); power is energy over the sample interval."""

    kind = "cpu"

    def __init__(self, domain: CPUDomain) -> None:
        super().__init__(domain.name, None, None, None, domain.source)
        self.domain = domain
        self._baseline_j = 0.0

    def open(self, t: float) -> None:
        self._baseline_j = self.domain.energy_j()
        # Estimates and fakes know their power up front; a RAPL counter's is known after one interval.
        power = getattr(self.domain, "power_w", None)
        self._store(t, 0.0, float(power()) if callable(power) else None)

    def fresh_energy_j(self) -> float | None:
        # Counters are cheap to read; an estimate reads /proc/stat, so it is interpolated instead.
        return self.domain.energy_j() - self._baseline_j if self.source == Source.MEASURED else None

    def sample(self, t: float) -> None:
        energy_j = self.domain.energy_j() - self._baseline_j
        with self._lock:
            prev_e, prev_t = self._energy_j, self._t
        power_w = (energy_j - prev_e) / (t - prev_t) if t > prev_t else None
        self._store(t, energy_j, power_w)
