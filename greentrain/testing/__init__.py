"""Test doubles shipped for users' tests: GPUs and CPU domains that behave like measured hardware.

- ``FakeGPU``: a ``GPU`` whose power and speed at each power limit come from
  the measured Zeus profiles, with an exact ground-truth energy integral.
- ``FileBackedGPU``: a profiled fake whose settings live in a file, so they survive a
  killed process (for restore-after-SIGKILL tests and the daemon's ``--fake-gpus``).
- ``FakeCPUDomain``: a ``CPUDomain`` drawing a constant power over an injected clock.
- ``greentrain.testing.fake_nvml``: a pynvml-level double (``FakeNVML``) raising
  pynvml's real error classes; imported on first use because it needs nvidia-ml-py.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from greentrain.testing.fake_cpu import FakeCPUDomain
from greentrain.testing.fake_gpu import FakeGPU
from greentrain.testing.file_backed_gpu import FileBackedGPU

__all__ = ["FakeGPU", "FakeCPUDomain", "FileBackedGPU", "fake_nvml"]


def __getattr__(name: str) -> ModuleType:
    if name == "fake_nvml":
        return importlib.import_module("greentrain.testing.fake_nvml")
    raise AttributeError(f"module 'greentrain.testing' has no attribute {name!r}")
