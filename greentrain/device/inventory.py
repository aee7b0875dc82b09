"""What this machine offers, as plain data: the ``greentrain doctor`` report.

Read-only by default (no NVML setter is called; see ``privilege.py``).
Built from a ``DeviceSet`` plus the full RAPL listing (including zones this
process may not read), the CPU estimate that applies where nothing is
measurable, and library versions. Rendering (table or JSON) is the CLI's job.
"""

from __future__ import annotations

import platform
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

from greentrain.device.base import GPU, GPUCapabilities
from greentrain.device.discovery import DeviceSet, privileged_route
from greentrain.device.nvml_errors import NVMLLibrary
from greentrain.device.privilege import Privilege, local_privilege
from greentrain.errors import ActuationError, DeviceError

__all__ = ["machine_report", "LIBRARIES"]

LIBRARIES = (
    "greentrain", "torch", "nvidia-ml-py", "codecarbon", "prometheus-client", "httpx", "click", "rich", "apscheduler",
)  # fmt: skip


def _safe(read: Callable[[], T]) -> T | None:
    try:
        return read()
    except (DeviceError, ValueError):
        return None


def _gpu_entry(gpu: GPU, own: Privilege, daemon: tuple[set[str], str] | None,
               probe_write: bool) -> dict[str, object]:
    try:
        probe = getattr(gpu, "probe_privileges", None)
        caps = probe() if probe_write and callable(probe) else gpu.capabilities
    except DeviceError as e:
        return {"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "error": str(e)}
    privilege = _judge(gpu, caps, own, daemon, probe_write)
    if caps.power_limit_control:
        caps = replace(caps, power_limit_permitted=privilege.permitted,
                       clock_control_permitted=privilege.permitted if caps.clock_control else None)
    limits = _safe(gpu.power_limit_constraints) if caps.power_limit_control else None
    clocks = _safe(gpu.supported_sm_clocks_mhz) if caps.clock_control else None
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "architecture": gpu.architecture,
        "energy_counter": caps.energy_counter,
        "energy_source": "measured" if caps.energy_counter else ("integrated" if caps.power_reading else None),
        "power_reading": caps.power_reading,
        "power_field": getattr(gpu, "power_field", None),
        "power_w": _safe(gpu.power_w) if caps.power_reading else None,
        "power_limit_control": caps.power_limit_control,
        "power_limit_permitted": caps.power_limit_permitted,
        "power_limit_w": _safe(gpu.power_limit_w),
        "power_limit_range_w": [limits.min_w, limits.max_w] if limits else None,
        "power_limit_default_w": limits.default_w if limits else None,
        "clock_control": caps.clock_control,
        "clock_control_permitted": caps.clock_control_permitted,
        "permitted_basis": privilege.basis,
        "permitted_verified": privilege.verified,
        "sm_clock_range_mhz": [min(clocks), max(clocks)] if clocks else None,
    }


def daemon_gpus(socket_path: str | Path | None) -> tuple[set[str], str] | None:
    """UUIDs the privileged route (``greentrain daemon``) manages and where, read only; None where none answers."""
    try:
        route = privileged_route(socket_path)
    except ActuationError:
        return None
    try:
        return route.managed()
    finally:
        route.close()


def _judge(gpu: GPU, caps: GPUCapabilities, own: Privilege, daemon: tuple[set[str], str] | None,
           probe_write: bool) -> Privilege:
    """Who may set this GPU's knobs: the write probe's answer, else this process, else the daemon (unverified)."""
    if not caps.power_limit_control:
        return Privilege(None, "the power limit cannot be changed on this device")
    if probe_write and caps.power_limit_permitted is not None:
        return Privilege(caps.power_limit_permitted, "same-value power-limit write (--probe-write)", verified=True)
    if own.permitted:
        return own
    if daemon is not None and gpu.uuid in daemon[0]:
        return Privilege(True, f"greentrain daemon at {daemon[1]} manages this GPU")
    if probe_write:  # the write was tried and said neither yes nor no
        return Privilege(None, "the same-value write neither succeeded nor was refused for privilege")
    return own


def _versions(nvml: NVMLLibrary | None) -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    driver = None
    if nvml is not None:
        try:
            raw = nvml.nvmlSystemGetDriverVersion()
            driver = raw.decode() if isinstance(raw, bytes) else str(raw)
        except Exception:
            driver = None
    versions["nvidia-driver"] = driver
    return versions


def _estimate_entry() -> dict[str, object]:
    from greentrain.device.estimate import CPUEstimate

    estimate = CPUEstimate()
    return {
        "cpu_model": estimate.cpu_model,
        "tdp_w": estimate.tdp_w,
        "tdp_source": estimate.tdp.source,
        "model": "power = TDP x (0.1 + 0.9 x load^3) (CodeCarbon's machine cpu_load model)",
    }


def machine_report(devices: DeviceSet, rapl_root: str | Path | None = "/sys/class/powercap", *,
                   probe_write: bool = False, daemon_socket: str | Path | None = None) -> dict[str, object]:
    """Everything ``greentrain doctor`` shows, JSON-serialisable.

    Read-only unless ``probe_write``: "permitted" is then judged from the effective uid and capabilities,
    or a reachable ``greentrain daemon`` (``daemon_socket``, default ``$GREENTRAIN_DAEMON_SOCKET``), and
    marked unverified. ``probe_write`` re-applies each GPU's current power limit to verify it.
    """
    from greentrain.device.rapl import find_rapl_domains

    rapl, _ = find_rapl_domains(rapl_root) if rapl_root is not None else ([], [])
    own = local_privilege()
    daemon = daemon_gpus(daemon_socket) if devices.gpus and not own.permitted else None
    gpus = [_gpu_entry(g, own, daemon, probe_write) for g in devices.gpus]
    readable = [d.name for d in rapl if d.readable()]
    measurable = [f"GPU {g['index']} ({g['energy_source']})" for g in gpus if g.get("energy_source")]
    measurable += [f"RAPL {name}" for name in readable]
    return {
        "gpus": gpus,
        "rapl": [{"name": d.name, "path": str(d.path), "readable": d.readable(), "status": d.status} for d in rapl],
        "cpu_estimate": _estimate_entry(),
        "estimate_used_for_cpu": not readable,
        "measurable": measurable,
        "summary": (
            "measurable: " + ", ".join(measurable)
            if measurable
            else "nothing measurable on this machine: energy will be estimated from CPU utilisation x TDP"
        ),
        "notes": list(devices.notes),
        "versions": _versions(devices.nvml),
        "platform": platform.platform(),
        "hardware_writes": "same-value power-limit write per GPU (--probe-write)" if probe_write else "none",
    }
