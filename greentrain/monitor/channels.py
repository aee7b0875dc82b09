"""One channel per device: turns raw reads into cumulative energy since the monitor started.

A RAPL zone is ``measured``: the sampler reads its (cheap) counter every pass.
GPUs are in ``gpu_channel.py``: power every pass, the expensive counter at a
slow cadence. Between samples ``energy_at`` extends the last sample with the
last power, so step attribution makes no device call on the training thread.
``energy_at`` never goes backwards and never raises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from greentrain.device.base import CPUDomain
from greentrain.errors import NotSupportedError
from greentrain.monitor.readings import DeviceReading
from greentrain.provenance import Source

__all__ = ["Channel", "CPUChannel", "EXTRAS_INTERVAL_S", "optional_read"]

T = TypeVar("T")

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
        self._extend_w: float | None = None  # what extends the figure past the last sample
        self._floor_j = 0.0  # largest value handed out, so energy never goes backwards
        self.power_limit_w: float | None = None
        self.sm_clock_hz: float | None = None

    def open(self, t: float) -> None:
        """Take the baseline at monitor start (may raise: the monitor then marks the channel failed)."""
        raise NotImplementedError

    def sample(self, t: float, anchor: bool = False, min_anchor_gap_s: float = 0.0) -> None:
        """One sampler pass (may raise); ``anchor`` also reads the device's energy counter, if it has one
        and its last read is at least ``min_anchor_gap_s`` old."""
        raise NotImplementedError

    def notes(self) -> list[str]:
        """What degraded on this device (beyond failing), for the monitor's notes."""
        return []

    def fail(self, error: BaseException) -> None:
        with self._lock:
            self.failed = True
            self.error = str(error).splitlines()[0] if str(error) else type(error).__name__

    def _store(self, t: float, energy_j: float, power_w: float | None, extend_w: float | None = None) -> None:
        with self._lock:
            self._energy_j, self._t = energy_j, t
            if power_w is not None:
                self._power_w = power_w
            self._extend_w = extend_w if extend_w is not None else self._power_w
            self._floor_j = max(self._floor_j, energy_j)

    def energy_at(self, t: float, exact: bool = False) -> float:
        """Cumulative energy at monitor time ``t``; never raises.

        Monotonic by default (what steps and exported counters need). ``exact``
        returns the figure itself, not the largest handed out so far: right
        after a counter read that is the counter's, which windows and job
        totals use (an estimate may have run ahead of it by up to one refresh).
        """
        with self._lock:
            energy_j = self._energy_j
            if not (self.failed or self.stopped) and self._extend_w is not None:
                energy_j += self._extend_w * max(0.0, t - self._t)
            if exact:
                return energy_j
            self._floor_j = max(self._floor_j, energy_j)
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


def optional_read(read: Callable[[], T]) -> T | None:
    """A secondary figure (limit, clock): None when unsupported; a lost device still raises."""
    try:
        return read()
    except NotSupportedError:
        return None


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

    def sample(self, t: float, anchor: bool = False, min_anchor_gap_s: float = 0.0) -> None:
        # RAPL counters are cheap: read every pass, so ``anchor`` changes nothing here.
        energy_j = self.domain.energy_j() - self._baseline_j
        with self._lock:
            prev_e, prev_t = self._energy_j, self._t
        power_w = (energy_j - prev_e) / (t - prev_t) if t > prev_t else None
        self._store(t, energy_j, power_w)
