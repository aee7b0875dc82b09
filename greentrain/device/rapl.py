"""CPU package and DRAM energy from Linux RAPL (``/sys/class/powercap/intel-rapl:*``).

Each zone exposes ``energy_uj``, a counter that wraps at
``max_energy_range_uj`` (minutes to hours at full load), so every read adds
the delta since the previous read and corrects one wrap. Read at least once
per wrap period (the monitor reads every 0.1 s). AMD CPUs expose the same
files. Since CVE-2020-8694 (PLATYPUS) ``energy_uj`` is readable by root only
on most distributions; such a zone reports "not readable (permission)".

Only package zones and their ``dram`` sub-zones are used: ``core``/``uncore``
are inside the package figure and ``psys`` covers the whole platform, so
adding them would count energy twice.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from greentrain.device.base import CPUDomain
from greentrain.errors import DeviceError, PrivilegeError
from greentrain.provenance import Source

__all__ = ["RAPLDomain", "find_rapl_domains", "RAPL_PERMISSION_FIX"]

RAPL_PERMISSION_FIX = (
    "RAPL counters are root-only since CVE-2020-8694: run as root, or "
    "`sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj` (until reboot), or use `greentrain daemon`"
)
_ZONE = re.compile(r"^intel-rapl:(\d+)(?::(\d+))?$")


def read_counter(path: Path) -> int:
    """One integer file of a powercap zone (every RAPL read goes through here, so a test can stand in a
    root-only file where the suite runs as root)."""
    return int(path.read_text(encoding="ascii").strip())


class RAPLDomain(CPUDomain):
    """One RAPL zone; ``energy_j`` counts from construction and survives counter wrap-around."""

    def __init__(self, path: str | Path, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        self.source = Source.MEASURED
        self._lock = threading.Lock()
        self._total_uj = 0
        self._last_raw_uj: int | None = None
        self.status = "ok"
        """'ok', 'not readable (permission)' or 'error: ...' (why ``energy_j`` cannot be read)."""
        try:
            self._max_range_uj = read_counter(self.path / "max_energy_range_uj")
            self._last_raw_uj = self._read_raw_uj()
        except PermissionError:
            self.status = "not readable (permission)"
        except (OSError, ValueError) as e:
            self.status = f"error: {e}"

    def _read_raw_uj(self) -> int:
        return read_counter(self.path / "energy_uj")

    def readable(self) -> bool:
        return self.status == "ok"

    def energy_j(self) -> float:
        if self.status == "not readable (permission)":
            raise PrivilegeError(f"{self.path / 'energy_uj'}: not readable (permission); {RAPL_PERMISSION_FIX}")
        if self.status != "ok":
            raise DeviceError(f"{self.path}: RAPL zone unusable ({self.status})")
        try:
            raw_uj = self._read_raw_uj()
        except PermissionError:
            raise PrivilegeError(
                f"{self.path / 'energy_uj'}: not readable (permission); {RAPL_PERMISSION_FIX}"
            ) from None
        except (OSError, ValueError) as e:
            raise DeviceError(f"{self.path / 'energy_uj'}: cannot read ({e})") from None
        with self._lock:
            assert self._last_raw_uj is not None
            delta_uj = raw_uj - self._last_raw_uj
            if delta_uj < 0:  # the counter wrapped once since the previous read
                delta_uj += self._max_range_uj
            self._total_uj += delta_uj
            self._last_raw_uj = raw_uj
            return self._total_uj / 1e6

    def __repr__(self) -> str:
        return f"RAPLDomain({str(self.path)!r}, name={self.name!r}, status={self.status!r})"


def _zone_name(path: Path) -> str | None:
    try:
        return path.joinpath("name").read_text(encoding="ascii").strip()
    except OSError:
        return None


def find_rapl_domains(root: str | Path = "/sys/class/powercap") -> tuple[list[RAPLDomain], list[str]]:
    """All package and DRAM zones under ``root`` (readable or not) and notes on what was skipped."""
    root = Path(root)
    if not root.is_dir():
        return [], [f"no RAPL interface at {root} (not Linux, no intel_rapl/powercap driver, or a VM that hides it)"]
    domains: list[RAPLDomain] = []
    notes: list[str] = []
    zones = [(m, p) for p in root.iterdir() if (m := _ZONE.match(p.name))]
    for match, path in sorted(zones, key=lambda item: (int(item[0][1]), int(item[0][2] or -1))):
        package, sub = match[1], match[2]
        name = _zone_name(path)
        if name is None:
            notes.append(f"{path}: no readable 'name' file; skipped")
        elif sub is None and name.startswith("package"):
            domains.append(RAPLDomain(path, name))
        elif sub is not None and name == "dram":
            domains.append(RAPLDomain(path, f"dram-{package}"))
        elif name == "psys":
            notes.append(f"{path}: psys (whole platform) skipped, it would double-count package and DRAM")
    if not domains:
        notes.append(f"no RAPL package or DRAM zones under {root}")
    return domains, notes
