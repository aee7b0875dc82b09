"""Estimated CPU energy where nothing is measurable: host CPU utilisation x TDP.

Power follows CodeCarbon 3.3.2's machine-level ``cpu_load`` model,
``P = TDP x (0.1 + 0.9 x load^3)`` (10 % of TDP at idle, TDP at full load),
with TDP from CodeCarbon's CPU table (see ``cpu_tdp``) times the number of
sockets. Utilisation comes from ``/proc/stat`` (psutil elsewhere) over each
interval between reads, so energy is integrated over exactly the time it
covers. Every figure is labelled ``estimated``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from greentrain.device.base import CPUDomain
from greentrain.device.cpu_tdp import TDPInfo, detect_cpu_model, lookup_tdp
from greentrain.errors import ConfigError
from greentrain.provenance import Source

__all__ = ["CPUEstimate", "load_power_w", "count_sockets"]

IDLE_FRACTION = 0.1
"""Share of TDP drawn at zero load (CodeCarbon's floor)."""


def load_power_w(tdp_w: float, load: float) -> float:
    """CodeCarbon's machine-level model: TDP x (0.1 + 0.9 x load^3), load in [0, 1]."""
    load = min(1.0, max(0.0, load))
    return tdp_w * (IDLE_FRACTION + (1.0 - IDLE_FRACTION) * load**3)


def count_sockets(cpuinfo_path: str | Path = "/proc/cpuinfo") -> int:
    """Distinct 'physical id' values in /proc/cpuinfo (1 when unknown)."""
    try:
        text = Path(cpuinfo_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 1
    ids = {line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("physical id")}
    return max(1, len(ids))


def _read_proc_stat(path: Path) -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from the aggregate 'cpu' line."""
    with path.open(encoding="ascii") as f:
        fields = f.readline().split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"{path}: first line is not the aggregate 'cpu' line")
    values = [float(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = values[3] + (values[4] if len(values) > 4 else 0.0)
    total = sum(values)
    return total - idle, total


def _read_psutil() -> tuple[float, float]:
    import psutil

    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    total = sum(times)
    return total - idle, total


class CPUEstimate(CPUDomain):
    """Host CPU energy estimated from utilisation; ``source`` is always ESTIMATED."""

    def __init__(
        self,
        *,
        tdp_w: float | None = None,
        cpu_model: str | None = None,
        proc_stat: str | Path = "/proc/stat",
        time_fn: Callable[[], float] = time.monotonic,
        name: str = "cpu-estimate",
    ) -> None:
        self.name = name
        self.source = Source.ESTIMATED
        self.cpu_model = cpu_model or detect_cpu_model()
        if tdp_w is None:
            info = lookup_tdp(self.cpu_model)
            sockets = count_sockets()
            self.tdp = TDPInfo(
                info.cpu_model, info.tdp_w * sockets, info.source + (f" x {sockets} sockets" if sockets > 1 else "")
            )
        else:
            if not tdp_w > 0:
                raise ConfigError(f"tdp_w: must be > 0 W, got {tdp_w}")
            self.tdp = TDPInfo(self.cpu_model, float(tdp_w), "given")
        self.tdp_w = self.tdp.tdp_w
        self._proc_stat = Path(proc_stat)
        self._time_fn = time_fn
        self._lock = threading.Lock()
        self._energy_j = 0.0
        self._load = 0.0
        self._last_t = time_fn()
        self._last_busy, self._last_total = self._read_counters()

    def _read_counters(self) -> tuple[float, float]:
        if self._proc_stat.exists():
            return _read_proc_stat(self._proc_stat)
        return _read_psutil()

    def energy_j(self) -> float:
        """Energy since construction, integrating the load of each interval between reads."""
        with self._lock:
            now = self._time_fn()
            busy, total = self._read_counters()
            d_total = total - self._last_total
            if d_total > 0:
                self._load = (busy - self._last_busy) / d_total
            self._energy_j += load_power_w(self.tdp_w, self._load) * max(0.0, now - self._last_t)
            self._last_t, self._last_busy, self._last_total = now, busy, total
            return self._energy_j

    def power_w(self) -> float:
        """Estimated power at the load seen over the last interval."""
        with self._lock:
            return load_power_w(self.tdp_w, self._load)

    def load(self) -> float:
        """Host CPU utilisation (0-1) over the last interval."""
        with self._lock:
            return self._load

    def __repr__(self) -> str:
        return f"CPUEstimate(cpu_model={self.cpu_model!r}, tdp_w={self.tdp_w:g}, tdp_source={self.tdp.source!r})"
