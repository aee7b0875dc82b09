"""A CPU energy domain double with deterministic energy over an injected clock."""

from __future__ import annotations

import time
from collections.abc import Callable

from greentrain.device.base import CPUDomain
from greentrain.provenance import Source

__all__ = ["FakeCPUDomain"]


class FakeCPUDomain(CPUDomain):
    """Draws a constant ``power_w``; ``energy_j`` = power x elapsed ``time_fn`` time (exact)."""

    def __init__(
        self,
        name: str = "package-0",
        power_w: float = 65.0,
        *,
        time_fn: Callable[[], float] = time.monotonic,
        source: Source = Source.MEASURED,
        readable: bool = True,
    ) -> None:
        self.name = name
        self.source = source
        self.power = float(power_w)
        self._time_fn = time_fn
        self._t0 = time_fn()
        self._readable = readable
        self._failure: Exception | None = None

    def fail(self, exc: Exception) -> None:
        """Make every later ``energy_j`` raise ``exc``."""
        self._failure = exc

    def reset_failure(self) -> None:
        self._failure = None

    def readable(self) -> bool:
        return self._readable

    def energy_j(self) -> float:
        if self._failure is not None:
            raise self._failure
        return self.power * (self._time_fn() - self._t0)

    def power_w(self) -> float:
        """The constant draw (like ``CPUEstimate.power_w``)."""
        return self.power
