"""Devices that greentrain measures and controls: GPUs (through GPU backends), CPU energy (RAPL), estimates.

Start with ``discover()``: it asks every GPU backend (the ``greentrain.gpu_backends``
plugin family: NVML, the test doubles, the ``greentrain daemon`` route, any vendor's
plugin) and returns a ``DeviceSet`` of what this process can see, with a note for
everything it cannot (no driver, no permission, no RAPL). Vendor modules (``nvml``,
``rapl``, ``estimate``) are imported only when used; pynvml is an optional extra.
"""

from greentrain.device.base import GPU, CPUDomain, GPUBackend, GPUCapabilities, PowerLimitConstraints, PrivilegedRoute
from greentrain.device.discovery import DeviceSet, NoDevices, discover

__all__ = ["GPU", "GPUBackend", "PrivilegedRoute", "CPUDomain", "GPUCapabilities", "PowerLimitConstraints",
           "DeviceSet", "NoDevices", "discover"]
