"""Device families: one ABC each, one method per vendor call, units in names.

A ``GPU`` is one physical accelerator of any vendor; a ``GPUBackend`` finds
GPUs (NVML, the ``greentrain daemon`` route, the test doubles, or a plugin);
a ``CPUDomain`` is one energy domain of the host (a RAPL package or DRAM
zone, or an estimate).
Capability flags say up front what a device can do, so callers branch on
flags instead of catching failures at run time. Vendor errors are translated
into ``greentrain.errors`` (``NotSupportedError``, ``PrivilegeError``,
``DeviceLostError`` ...).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from greentrain.provenance import Source

__all__ = ["GPUCapabilities", "PowerLimitConstraints", "GPU", "GPUBackend", "PrivilegedRoute", "CPUDomain"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUCapabilities:
    """What a GPU offers; ``*_permitted`` says whether this process may use a control."""

    energy_counter: bool
    """A monotonic total-energy counter (NVML, Volta and newer)."""
    power_reading: bool
    """Instant or averaged board power can be read."""
    power_limit_control: bool
    """The power limit can be changed on this device (hardware/driver support)."""
    clock_control: bool
    """SM clocks can be locked to a range."""
    power_limit_permitted: bool | None = None
    """Whether this process has the privilege to set the power limit (None: unknown)."""
    clock_control_permitted: bool | None = None
    """Whether this process has the privilege to lock clocks (None: unknown)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerLimitConstraints:
    """Range and default of a GPU's power limit, in watts."""

    min_w: float
    max_w: float
    default_w: float


class GPU(ABC):
    """One physical GPU. Implementations: NVML (``nvml.py``), the daemon-routed GPU
    (``greentrain.daemon.gpu``), the testing fakes, and those of GPU-backend plugins."""

    index: int
    """Index as the vendor library numbers it (not the CUDA_VISIBLE_DEVICES position)."""
    uuid: str
    """Vendor UUID, e.g. 'GPU-5f3c...' (the dcgm-exporter ``UUID`` label)."""
    name: str
    """Marketing name, e.g. 'NVIDIA H100 80GB HBM3'."""
    architecture: str
    """Architecture name, e.g. 'hopper'."""

    @property
    @abstractmethod
    def capabilities(self) -> GPUCapabilities:
        """What this GPU supports and what this process may change."""

    @abstractmethod
    def total_energy_j(self) -> float:
        """Energy counter since driver load, joules. Raises NotSupportedError without a counter."""

    @abstractmethod
    def power_w(self) -> float:
        """Current board power draw, watts."""

    @abstractmethod
    def power_limit_w(self) -> float:
        """Enforced power limit, watts."""

    @abstractmethod
    def power_limit_constraints(self) -> PowerLimitConstraints:
        """Allowed range and default of the power limit."""

    @abstractmethod
    def set_power_limit_w(self, power_limit_w: float) -> None:
        """Set the power limit. Raises ConfigError out of range, PrivilegeError without privilege."""

    @abstractmethod
    def supported_sm_clocks_mhz(self) -> list[int]:
        """SM clocks (MHz) the GPU supports at its top memory clock, descending."""

    @abstractmethod
    def sm_clock_mhz(self) -> int:
        """Current SM clock, MHz."""

    @abstractmethod
    def lock_sm_clocks_mhz(self, min_mhz: int, max_mhz: int) -> None:
        """Lock SM clocks to [min_mhz, max_mhz]."""

    @abstractmethod
    def reset_sm_clocks(self) -> None:
        """Undo ``lock_sm_clocks_mhz``."""

    @abstractmethod
    def utilization_pct(self) -> float:
        """GPU busy percentage over the driver's last sample period."""

    @abstractmethod
    def temperature_c(self) -> float:
        """Core temperature, degrees Celsius."""

    @abstractmethod
    def throttle_reasons(self) -> list[str]:
        """Active clock-event (throttle) reasons as short names, e.g. ['sw_power_cap']."""

    def reset_power_limit(self) -> None:
        """Restore the default power limit."""
        self.set_power_limit_w(self.power_limit_constraints().default_w)


class GPUBackend(ABC):
    """One way of finding GPUs: a vendor library, a privileged helper, or the test doubles.

    Backends are the ``greentrain.gpu_backends`` plugin family; ``discover()``
    builds each registered one with no arguments and asks it in turn. A new
    vendor is one module (its ``GPU`` and its backend) plus one entry-point line.
    """

    name: ClassVar[str]
    """Short label used in notes, e.g. 'nvml'."""

    @abstractmethod
    def discover(self, visible: str | None, notes: list[str]) -> list[GPU]:
        """The GPUs visible to this process, in CUDA order.

        ``visible`` is ``CUDA_VISIBLE_DEVICES`` (None: all GPUs). A missing library,
        driver or permission is a line in ``notes`` and no GPUs, never an exception;
        only an explicit request that cannot be honoured raises (``NotSupportedError``).
        """

    def close(self) -> None:
        """Release the library (idempotent); the GPUs it returned are unusable after."""


class PrivilegedRoute(GPUBackend):
    """A backend that finds no GPU of its own: it reaches GPUs another backend found through
    a helper that has the privilege this process lacks (``greentrain daemon``).

    Setting a knob through the route is the same call as setting it directly
    (``wrap(gpu).set_power_limit_w(w)``), so callers switch routes without branching on how.
    """

    def __init__(self, socket_path: str | Path | None = None, *, job: str = "") -> None:
        self.socket_path = socket_path
        self.job = job

    def discover(self, visible: str | None, notes: list[str]) -> list[GPU]:
        return []

    @abstractmethod
    def wrap(self, gpu: GPU) -> GPU:
        """``gpu`` with its setters sent through the helper; reads stay local."""

    @abstractmethod
    def managed(self, timeout_s: float = 2.0) -> tuple[set[str], str] | None:
        """UUIDs the helper manages and where it listens, read only; None where none is reachable."""

    @abstractmethod
    def reset(self) -> None:
        """Restore every setting made through this route (nothing to do when none was)."""


class CPUDomain(ABC):
    """One host energy domain: a RAPL zone (package, dram) or an estimate."""

    name: str
    """Label, e.g. 'package-0', 'dram-0', 'cpu-estimate'."""
    source: Source
    """MEASURED for a RAPL counter, ESTIMATED for a model."""

    @abstractmethod
    def energy_j(self) -> float:
        """Monotonic energy in joules since this object was created (wrap-around handled)."""

    def readable(self) -> bool:
        """Whether ``energy_j`` can be read (False e.g. without permission)."""
        return True
