"""The test doubles as a GPU backend (the ``fake`` entry of ``greentrain.gpu_backends``).

``discover()`` finds these GPUs like any vendor's: set ``GREENTRAIN_FAKE_GPUS``
to ``MODEL[:COUNT],...`` (models with measured profiles: v100, a40, rtx6000)
and every job, ``greentrain doctor`` and ``greentrain monitor`` see simulated
GPUs, each drawing what that model drew in the measured profile (a note says
they are simulated). With ``GREENTRAIN_FAKE_GPU_DIR`` they are file-backed, so
their settings survive the process (restore-after-SIGKILL demos). Unset: none.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from greentrain.device.base import GPU, GPUBackend
from greentrain.device.profiles import BUILTIN_GPUS
from greentrain.device.visible import resolve_visible_devices
from greentrain.errors import ConfigError

__all__ = ["FAKE_GPUS_ENV", "FAKE_GPU_DIR_ENV", "FakeBackend", "parse_fake_gpus"]

FAKE_GPUS_ENV = "GREENTRAIN_FAKE_GPUS"
FAKE_GPU_DIR_ENV = "GREENTRAIN_FAKE_GPU_DIR"


def parse_fake_gpus(spec: str, where: str = FAKE_GPUS_ENV) -> list[str]:
    """``'a40:2,v100'`` -> ``['a40', 'a40', 'v100']``; ConfigError naming ``where`` for bad input."""
    models: list[str] = []
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        model, _, count = entry.partition(":")
        model = model.strip().lower()
        if model not in BUILTIN_GPUS:
            raise ConfigError(f"{where}: {model!r} has no measured profile; use one of {', '.join(BUILTIN_GPUS)}")
        try:
            n = int(count or "1")
        except ValueError:
            n = -1
        if not 1 <= n <= 64:
            raise ConfigError(f"{where}: {entry!r}: expected MODEL[:COUNT] with COUNT in 1..64, e.g. a40:2")
        models += [model] * n
    return models


class FakeBackend(GPUBackend):
    """Simulated GPUs from measured profiles: ``models`` (default: ``$GREENTRAIN_FAKE_GPUS``)."""

    name: ClassVar[str] = "fake"

    def __init__(self, models: Sequence[str] | None = None, *, state_dir: str | Path | None = None) -> None:
        self.models = list(models) if models is not None else parse_fake_gpus(os.environ.get(FAKE_GPUS_ENV, ""))
        directory = state_dir if state_dir is not None else os.environ.get(FAKE_GPU_DIR_ENV)
        self.state_dir = Path(directory) if directory else None

    def _make(self, model: str, index: int) -> GPU:
        if self.state_dir is None:
            from greentrain.testing.fake_gpu import FakeGPU

            return FakeGPU(model, index=index)
        from greentrain.testing.file_backed_gpu import FileBackedGPU

        self.state_dir.mkdir(parents=True, exist_ok=True)
        return FileBackedGPU(self.state_dir / f"fake-gpu{index}.json", model, index=index)

    def discover(self, visible: str | None, notes: list[str]) -> list[GPU]:
        if not self.models:
            return []
        gpus = [self._make(model, i) for i, model in enumerate(self.models)]
        positions, visible_notes = resolve_visible_devices(visible, [g.uuid for g in gpus])
        notes.extend(visible_notes)
        notes.append(f"simulated GPUs ({FAKE_GPUS_ENV}): {', '.join(self.models)}, drawing their measured profiles")
        return [gpus[p] for p in positions]
