"""Devices that greentrain measures and controls: NVIDIA GPUs (NVML), CPU energy (RAPL), estimates.

Start with ``discover()``: it returns a ``DeviceSet`` of what this process can
see, with a note for everything it cannot (no driver, no permission, no
RAPL). Vendor modules (``nvml``, ``rapl``, ``estimate``) are imported only
when used; pynvml is an optional extra.
"""

from greentrain.device.base import GPU, CPUDomain, GPUCapabilities, PowerLimitConstraints
from greentrain.device.discovery import DeviceSet, discover

__all__ = ["GPU", "CPUDomain", "GPUCapabilities", "PowerLimitConstraints", "DeviceSet", "discover"]
