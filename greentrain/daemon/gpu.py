"""The ``greentrain daemon`` route as a GPU backend: a ``GPU`` whose setters go through the daemon.

A job without the privilege to change GPU settings reads its GPUs directly
(reading needs none) and sends each change to ``greentrain daemon`` instead.
``DaemonGPU`` is that GPU: the same calls as any other, so the code that
applies decisions does not branch on how a setting is reached. The daemon
journals each change and restores it when the job resets or its connection
closes (even a killed job's). ``DaemonBackend`` is the ``daemon`` entry of
``greentrain.gpu_backends``: it finds no GPU of its own and wraps those the
other backends found.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from greentrain.actuators.journal import Knob
from greentrain.daemon.client import DEFAULT_SOCKET_ENV, DaemonClient
from greentrain.device.base import GPU, GPUCapabilities, PowerLimitConstraints, PrivilegedRoute
from greentrain.errors import GreentrainError

__all__ = ["DaemonBackend", "DaemonGPU", "daemon_gpus"]

_DEFAULT_SOCKET = "/run/greentrain/daemon.sock"


def daemon_gpus(socket_path: str | Path | None, timeout_s: float = 2.0) -> tuple[set[str], str] | None:
    """UUIDs a reachable ``greentrain daemon`` manages and its socket, via its read-only ``status``; None if none.

    ``socket_path`` None uses ``$GREENTRAIN_DAEMON_SOCKET`` or the default socket; a missing socket file
    is simply no daemon (nothing is connected to).
    """
    path = Path(socket_path or os.environ.get(DEFAULT_SOCKET_ENV) or _DEFAULT_SOCKET)
    if not path.exists():
        return None
    try:
        with DaemonClient(path, timeout_s=timeout_s) as client:
            reply = client.status()
    except (GreentrainError, OSError):
        return None
    gpus = reply.get("gpus")
    return {str(g.get("uuid")) for g in (gpus if isinstance(gpus, list) else []) if isinstance(g, dict)}, str(path)


class DaemonGPU(GPU):
    """``gpu`` read directly, changed through the daemon of ``route`` (one connection per job)."""

    def __init__(self, gpu: GPU, route: DaemonBackend) -> None:
        self.gpu = gpu
        self._route = route
        self.index, self.uuid, self.name, self.architecture = gpu.index, gpu.uuid, gpu.name, gpu.architecture

    def __getattr__(self, name: str) -> object:  # vendor extras of the wrapped GPU (e.g. NVML's ``label``)
        if name == "gpu":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.gpu, name)

    @property
    def capabilities(self) -> GPUCapabilities:
        return self.gpu.capabilities

    def total_energy_j(self) -> float:
        return self.gpu.total_energy_j()

    def power_w(self) -> float:
        return self.gpu.power_w()

    def power_limit_w(self) -> float:
        return self.gpu.power_limit_w()

    def power_limit_constraints(self) -> PowerLimitConstraints:
        return self.gpu.power_limit_constraints()

    def supported_sm_clocks_mhz(self) -> list[int]:
        return self.gpu.supported_sm_clocks_mhz()

    def sm_clock_mhz(self) -> int:
        return self.gpu.sm_clock_mhz()

    def utilization_pct(self) -> float:
        return self.gpu.utilization_pct()

    def temperature_c(self) -> float:
        return self.gpu.temperature_c()

    def throttle_reasons(self) -> list[str]:
        return self.gpu.throttle_reasons()

    def set_power_limit_w(self, power_limit_w: float) -> None:
        self._route.client.set_power_limit_w(self.uuid, float(power_limit_w))

    def lock_sm_clocks_mhz(self, min_mhz: int, max_mhz: int) -> None:
        self._route.client.lock_sm_clocks_mhz(self.uuid, int(min_mhz), int(max_mhz))

    def reset_sm_clocks(self) -> None:
        self._route.client.reset(self.uuid, Knob.SM_CLOCKS)

    def reset_power_limit(self) -> None:
        self._route.client.reset(self.uuid, Knob.POWER_LIMIT)


class DaemonBackend(PrivilegedRoute):
    """The route to ``greentrain daemon`` at ``socket_path`` (None: ``$GREENTRAIN_DAEMON_SOCKET`` or the default)."""

    name: ClassVar[str] = "daemon"

    def __init__(self, socket_path: str | Path | None = None, *, job: str = "") -> None:
        super().__init__(socket_path, job=job)
        self._client: DaemonClient | None = None

    @property
    def client(self) -> DaemonClient:
        """The job's one connection, opened at the first change (the daemon restores when it closes)."""
        if self._client is None:
            self._client = DaemonClient(self.socket_path, job=self.job)
        return self._client

    def wrap(self, gpu: GPU) -> GPU:
        return DaemonGPU(gpu, self)

    def managed(self, timeout_s: float = 2.0) -> tuple[set[str], str] | None:
        return daemon_gpus(self.socket_path, timeout_s)

    def reset(self) -> None:
        if self._client is not None:
            self._client.reset()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
