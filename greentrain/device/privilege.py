"""Whether this process may change GPU settings, decided without writing anything.

NVML only tells whether a setter is allowed by trying it, and a same-value
write is still a write: on a shared node a diagnostic must not make one. So
``greentrain doctor`` judges from what can be read: the effective uid, the
effective capability set (``CapEff`` in ``/proc/self/status``; CAP_SYS_ADMIN is
what NVML's setters check besides root) and a reachable ``greentrain daemon``
that manages the GPU (asked through the privileged route's ``managed()``,
``greentrain.daemon.gpu``). The answer is marked *unverified*; ``doctor
--probe-write`` settles it with the explicit same-value write.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CAP_SYS_ADMIN", "Privilege", "effective_capabilities", "local_privilege"]

CAP_SYS_ADMIN = 21
"""Bit number of CAP_SYS_ADMIN in the capability sets (linux/capability.h)."""


@dataclass(frozen=True, slots=True)
class Privilege:
    """A judgement of write privilege: ``permitted`` (None: unknown), on what ``basis``, and whether tried."""

    permitted: bool | None
    basis: str
    """What the judgement rests on, e.g. 'euid 0', 'CAP_SYS_ADMIN', 'greentrain daemon at PATH'."""
    verified: bool = False
    """True only after a write was actually tried (``doctor --probe-write``)."""


def effective_capabilities(status_path: str | Path = "/proc/self/status") -> int | None:
    """The ``CapEff`` bit mask of this process, or None where it cannot be read (not Linux)."""
    try:
        text = Path(status_path).read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            try:
                return int(line.split(":", 1)[1].strip(), 16)
            except ValueError:
                return None
    return None


def local_privilege(status_path: str | Path = "/proc/self/status") -> Privilege:
    """This process's own privilege, from its effective uid and capabilities (read only)."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is not None and geteuid() == 0:
        return Privilege(True, "euid 0 (root)")
    caps = effective_capabilities(status_path)
    if caps is not None and caps >> CAP_SYS_ADMIN & 1:
        return Privilege(True, "CAP_SYS_ADMIN in the effective capability set")
    if geteuid is None:
        return Privilege(None, "no effective uid on this platform")
    reason = f"euid {geteuid()}, no CAP_SYS_ADMIN" if caps is not None else f"euid {geteuid()}"
    return Privilege(False, reason)
