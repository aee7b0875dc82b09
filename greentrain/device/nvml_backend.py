"""The NVML backend: NVIDIA GPUs through pynvml (the ``nvml`` entry of ``greentrain.gpu_backends``).

It initialises NVML, opens every GPU, keeps those ``CUDA_VISIBLE_DEVICES``
selects and skips MIG-mode GPUs with a note (an explicitly selected one is
refused). A missing pynvml or driver is a note, never an exception.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar

from greentrain.device.base import GPU, GPUBackend
from greentrain.device.nvml_errors import NVMLLibrary, translate_nvml_error
from greentrain.device.visible import MIG_REFUSAL, resolve_visible_devices
from greentrain.errors import DeviceError, NotSupportedError

if TYPE_CHECKING:
    from greentrain.device.nvml import NVMLGPU

__all__ = ["NVMLBackend"]


class NVMLBackend(GPUBackend):
    """NVIDIA GPUs via NVML; ``nvml`` injects a pynvml-like module (e.g. ``FakeNVML``)."""

    name: ClassVar[str] = "nvml"

    def __init__(self, nvml: NVMLLibrary | None = None) -> None:
        self._given = nvml
        self.module: NVMLLibrary | None = None
        """The initialised pynvml-like module while open (None before, after ``close`` or without a driver)."""

    def discover(self, visible: str | None, notes: list[str]) -> list[GPU]:
        self.module = _init_nvml(self._given, notes)
        if self.module is None:
            return []
        try:
            return _nvml_gpus(self.module, visible, notes)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.module is not None:
            try:
                self.module.nvmlShutdown()
            except Exception:
                pass
            self.module = None


def _init_nvml(nvml: NVMLLibrary | None, notes: list[str]) -> NVMLLibrary | None:
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


def _open_gpu(nvml: NVMLLibrary, index: int, notes: list[str]) -> NVMLGPU | None:
    from greentrain.device.nvml import NVMLGPU

    try:
        return NVMLGPU(nvml, nvml.nvmlDeviceGetHandleByIndex(index), index)
    except nvml.NVMLError as e:
        notes.append(f"GPU {index} skipped: {translate_nvml_error(nvml, e, f'GPU {index}', 'opening the device')}")
    except DeviceError as e:
        notes.append(f"GPU {index} skipped: {e}")
    return None


def _nvml_gpus(nvml: NVMLLibrary, cuda_visible_devices: str | None, notes: list[str]) -> list[GPU]:
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
