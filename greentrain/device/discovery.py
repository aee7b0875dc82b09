"""Find what this machine can measure: NVIDIA GPUs visible to this process, RAPL zones, else an estimate.

``discover`` never raises for missing hardware, drivers or permissions: it
returns what exists and a ``notes`` line for each thing that does not (so the
``doctor`` command and the monitor can say why). The one refusal is an
explicit request it cannot honour: a MIG slice in ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from greentrain.device.base import GPU, CPUDomain
from greentrain.device.nvml_errors import translate_nvml_error
from greentrain.device.visible import MIG_REFUSAL, resolve_visible_devices
from greentrain.errors import DeviceError, NotSupportedError

if TYPE_CHECKING:
    from greentrain.device.nvml import NVMLGPU

__all__ = ["DeviceSet", "discover", "FROM_ENV", "DEFAULT_RAPL_ROOT"]

DEFAULT_RAPL_ROOT = "/sys/class/powercap"


class _FromEnv:
    def __repr__(self) -> str:
        return "<os.environ['CUDA_VISIBLE_DEVICES']>"


FROM_ENV: Any = _FromEnv()
"""Default of ``discover(cuda_visible_devices=...)``: read the environment at call time."""


@dataclass
class DeviceSet:
    """The devices a job measures, plus human-readable lines on what is missing and why."""

    gpus: list[GPU] = field(default_factory=list)
    cpus: list[CPUDomain] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    nvml: Any = None
    """The initialised pynvml-like module (None without GPUs); ``close`` shuts it down."""

    def measurable(self) -> bool:
        """Whether any figure will be measured or integrated rather than estimated."""
        return bool(self.gpus) or any(c.source.value == "measured" for c in self.cpus)

    def close(self) -> None:
        """Release NVML (idempotent)."""
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass
            self.nvml = None

    def __enter__(self) -> DeviceSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _init_nvml(nvml: Any | None, notes: list[str]) -> Any | None:
    """Import (if needed) and initialise NVML; None with a note when there is no usable driver."""
    if nvml is None:
        try:
            from greentrain.device.nvml import load_pynvml

            nvml = load_pynvml()
        except ImportError as e:
            notes.append(f"{e}: no NVIDIA GPUs measured")
            return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        missing = {getattr(nvml, n, None) for n in ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED")}
        if getattr(e, "value", None) in missing:
            notes.append("no NVIDIA driver found (libnvidia-ml not loadable): no NVIDIA GPUs")
        else:
            notes.append(f"no NVIDIA GPUs: {translate_nvml_error(nvml, e, 'NVML', 'nvmlInit')}")
        return None
    return nvml


def _open_gpu(nvml: Any, index: int, notes: list[str]) -> NVMLGPU | None:
    from greentrain.device.nvml import NVMLGPU

    try:
        return NVMLGPU(nvml, nvml.nvmlDeviceGetHandleByIndex(index), index)
    except nvml.NVMLError as e:
        notes.append(f"GPU {index} skipped: {translate_nvml_error(nvml, e, f'GPU {index}', 'opening the device')}")
    except DeviceError as e:
        notes.append(f"GPU {index} skipped: {e}")
    return None


def _nvml_gpus(nvml: Any, cuda_visible_devices: str | None, notes: list[str]) -> list[GPU]:
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as e:
        notes.append(f"no NVIDIA GPUs: {translate_nvml_error(nvml, e, 'NVML', 'counting GPUs')}")
        return []
    if count == 0:
        notes.append("NVIDIA driver loaded but it reports no GPUs")
    gpus = [_open_gpu(nvml, i, notes) for i in range(count)]
    positions, visible_notes = resolve_visible_devices(cuda_visible_devices, [g.uuid if g else "" for g in gpus])
    notes.extend(visible_notes)
    by_index = cuda_visible_devices is not None and any(e.strip().isdigit() for e in cuda_visible_devices.split(","))
    if by_index and len({g.name for g in gpus if g}) > 1 and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        notes.append("mixed GPU models: set CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA indices match NVML indices")
    selected: list[GPU] = []
    for position in positions:
        gpu = gpus[position]
        if gpu is None:
            continue
        try:
            mig = gpu.mig_enabled()
        except DeviceError as e:
            notes.append(f"{gpu.label} skipped: {e}")
            continue
        if mig:
            if cuda_visible_devices is not None:
                raise NotSupportedError(f"{gpu.label} is in MIG mode: {MIG_REFUSAL}")
            notes.append(f"{gpu.label} is in MIG mode and was skipped: {MIG_REFUSAL}")
            continue
        selected.append(gpu)
    return selected


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
    cuda_visible_devices: str | None = FROM_ENV,
    *,
    nvml: Any = None,
    rapl_root: str | Path | None = "/sys/class/powercap",
    estimate_cpu: bool = True,
) -> DeviceSet:
    """Find the GPUs visible to this process (CUDA order) and the host's CPU energy domains.

    ``cuda_visible_devices`` defaults to the environment's value (None: all
    GPUs). ``nvml`` injects a pynvml-like module (e.g.
    ``greentrain.testing.fake_nvml.FakeNVML``); ``rapl_root=None`` skips RAPL, and
    ``$GREENTRAIN_RAPL_ROOT`` replaces the default ``/sys/class/powercap``;
    ``estimate_cpu`` adds a ``CPUEstimate`` when no RAPL zone is readable.
    Raises ``NotSupportedError`` only for an explicitly selected MIG device.
    """
    if cuda_visible_devices is FROM_ENV:
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
        devices.nvml = _init_nvml(nvml, notes)
        if devices.nvml is not None:
            try:
                devices.gpus = _nvml_gpus(devices.nvml, cuda_visible_devices, notes)
            except BaseException:
                devices.close()
                raise
    devices.cpus = _cpu_domains(rapl_root, estimate_cpu, notes)
    return devices
