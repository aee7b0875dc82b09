"""Find what this machine can measure: the GPUs visible to this process, RAPL zones, else an estimate.

GPUs come from the GPU backends, the ``greentrain.gpu_backends`` plugin family
(NVML, the test doubles, the ``greentrain daemon`` route, and any vendor's
plugin), asked in turn; the first backend to report a GPU's UUID keeps it.
``discover`` never raises for missing hardware, drivers or permissions: it
returns what exists and a ``notes`` line for each thing that does not (so the
``doctor`` command and the monitor can say why). The one refusal is an
explicit request it cannot honour: a MIG slice in ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from greentrain import plugins
from greentrain.device.base import GPU, CPUDomain, GPUBackend, PrivilegedRoute
from greentrain.device.nvml_backend import NVMLBackend
from greentrain.device.nvml_errors import NVMLLibrary
from greentrain.errors import ActuationError, ConfigError, DeviceError, NotSupportedError

__all__ = ["DeviceSet", "NoDevices", "discover", "gpu_backends", "privileged_route", "FROM_ENV", "DEFAULT_RAPL_ROOT"]

DEFAULT_RAPL_ROOT = "/sys/class/powercap"


class _FromEnv:
    def __repr__(self) -> str:
        return "<os.environ['CUDA_VISIBLE_DEVICES']>"


FROM_ENV = _FromEnv()
"""Default of ``discover(cuda_visible_devices=...)``: read the environment at call time."""


@dataclass
class DeviceSet:
    """The devices a job measures, plus human-readable lines on what is missing and why."""

    gpus: list[GPU] = field(default_factory=list)
    cpus: list[CPUDomain] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    nvml: NVMLLibrary | None = None
    """The initialised pynvml-like module (None without NVIDIA GPUs): driver versions for ``doctor``."""
    backends: list[GPUBackend] = field(default_factory=list)
    """The backends asked; ``close`` releases them."""
    monitored: ClassVar[bool] = True
    """Whether a job measures these devices with a monitor (``NoDevices``: no)."""

    def measurable(self) -> bool:
        """Whether any figure will be measured or integrated rather than estimated."""
        return bool(self.gpus) or any(c.source.value == "measured" for c in self.cpus)

    def close(self) -> None:
        """Release every backend (idempotent)."""
        for backend in self.backends:
            backend.close()
        if self.nvml is not None and not self.backends:  # a DeviceSet built by hand around an NVML module
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass
        self.backends, self.nvml = [], None

    def __enter__(self) -> DeviceSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class NoDevices(DeviceSet):
    """Stands for 'measure nothing' (``devices=False``, ``greentrain run --no-measure``): no device is asked,
    and no monitor runs, so the job's energy is unknown rather than 0 J."""

    monitored: ClassVar[bool] = False


def gpu_backends(nvml: NVMLLibrary | None = None, notes: list[str] | None = None) -> list[GPUBackend]:
    """One instance of each registered GPU backend, in declaration order.

    ``nvml`` (a pynvml-like module) replaces the library of the NVML backend. A
    backend whose package is missing is left out with a line in ``notes``.
    """
    backends: list[GPUBackend] = []
    for name in plugins.available("gpu_backends"):
        try:
            cls = plugins.load("gpu_backends", name)
        except ConfigError as e:
            if notes is not None:
                notes.append(f"GPU backend {name!r} unavailable: {e}")
            continue
        if not (isinstance(cls, type) and issubclass(cls, GPUBackend)):
            raise ConfigError(f"gpu_backends entry {name!r} does not name a GPUBackend class")
        backends.append(NVMLBackend(nvml) if nvml is not None and issubclass(cls, NVMLBackend) else cls())
    return backends


def privileged_route(socket_path: str | Path | None, *, job: str = "") -> PrivilegedRoute:
    """The registered route to GPUs through a privileged helper (``greentrain daemon``) at ``socket_path``.

    Raises ``ActuationError`` where no such backend is installed.
    """
    for name in plugins.available("gpu_backends"):
        try:
            cls = plugins.load("gpu_backends", name)
        except ConfigError:
            continue
        if isinstance(cls, type) and issubclass(cls, PrivilegedRoute):
            return cls(socket_path, job=job)
    raise ActuationError("no privileged GPU route (the greentrain daemon backend) is installed")


def _gpus(backends: Sequence[GPUBackend], visible: str | None, notes: list[str]) -> list[GPU]:
    gpus: list[GPU] = []
    owner: dict[str, str] = {}
    for backend in backends:
        try:
            found = backend.discover(visible, notes)
        except NotSupportedError:
            raise  # an explicit request it cannot honour (a selected MIG slice)
        except (DeviceError, OSError) as e:  # a backend's fault must not hide the other backends' GPUs
            notes.append(f"GPU backend {backend.name!r} failed: {e}")
            continue
        for gpu in found:
            if gpu.uuid in owner:
                notes.append(f"GPU {gpu.uuid} is also reported by the {backend.name} backend: "
                             f"the {owner[gpu.uuid]} backend's is used")
                continue
            owner[gpu.uuid] = backend.name
            gpus.append(gpu)
    return gpus


def _cpu_domains(rapl_root: str | Path | None, estimate_cpu: bool, notes: list[str]) -> list[CPUDomain]:
    from greentrain.device.rapl import find_rapl_domains

    cpus: list[CPUDomain] = []
    if rapl_root is not None:
        domains, rapl_notes = find_rapl_domains(rapl_root)
        notes.extend(rapl_notes)
        for domain in domains:
            if domain.readable():
                cpus.append(domain)
            else:
                notes.append(f"RAPL {domain.name} at {domain.path}: {domain.status}")
    if not cpus and estimate_cpu:
        from greentrain.device.estimate import CPUEstimate

        estimate = CPUEstimate()
        what = f"utilisation x {estimate.tdp_w:g} W TDP for {estimate.cpu_model!r}"
        notes.append(f"CPU energy estimated: {what} ({estimate.tdp.source})")
        cpus.append(estimate)
    return cpus


def discover(
    cuda_visible_devices: str | _FromEnv | None = FROM_ENV,
    *,
    nvml: NVMLLibrary | None = None,
    backends: Sequence[GPUBackend] | None = None,
    rapl_root: str | Path | None = "/sys/class/powercap",
    estimate_cpu: bool = True,
) -> DeviceSet:
    """Find the GPUs visible to this process (CUDA order) and the host's CPU energy domains.

    ``cuda_visible_devices`` defaults to the environment's value (None: all
    GPUs). GPUs come from ``backends`` (default: every registered GPU backend);
    ``nvml`` injects a pynvml-like module into the NVML backend (e.g.
    ``greentrain.testing.fake_nvml.FakeNVML``). ``rapl_root=None`` skips RAPL, and
    ``$GREENTRAIN_RAPL_ROOT`` replaces the default ``/sys/class/powercap``;
    ``estimate_cpu`` adds a ``CPUEstimate`` when no RAPL zone is readable.
    Raises ``NotSupportedError`` only for an explicitly selected MIG device.
    """
    if isinstance(cuda_visible_devices, _FromEnv):  # FROM_ENV, its only instance
        cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    if (
        rapl_root is not None and str(rapl_root) == DEFAULT_RAPL_ROOT
    ):  # e.g. a host's powercap tree mounted elsewhere in a container
        rapl_root = os.environ.get("GREENTRAIN_RAPL_ROOT") or rapl_root
    notes: list[str] = []
    devices = DeviceSet(notes=notes)
    if cuda_visible_devices is not None and not cuda_visible_devices.strip():
        notes.append("CUDA_VISIBLE_DEVICES is set but empty: no GPUs are visible to this process")
    else:
        devices.backends = list(backends) if backends is not None else gpu_backends(nvml, notes)
        try:
            devices.gpus = _gpus(devices.backends, cuda_visible_devices, notes)
        except BaseException:
            devices.close()
            raise
        devices.nvml = next((b.module for b in devices.backends if isinstance(b, NVMLBackend)), None)
    devices.cpus = _cpu_domains(rapl_root, estimate_cpu, notes)
    return devices
