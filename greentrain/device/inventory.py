"""What this machine offers, as plain data: the ``greentrain doctor`` report.

Built from a ``DeviceSet`` plus the full RAPL listing (including zones this
process may not read), the CPU estimate that applies where nothing is
measurable, and library versions. Rendering (table or JSON) is the CLI's job.
"""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from greentrain.device.base import GPU
from greentrain.device.discovery import DeviceSet
from greentrain.errors import DeviceError

__all__ = ["machine_report", "LIBRARIES"]

LIBRARIES = (
    "greentrain", "torch", "nvidia-ml-py", "codecarbon", "prometheus-client", "httpx", "click", "rich", "apscheduler",
)  # fmt: skip


def _safe(read: Any) -> Any:
    try:
        return read()
    except (DeviceError, ValueError):
        return None


def _gpu_entry(gpu: GPU) -> dict[str, Any]:
    try:
        probe = getattr(gpu, "probe_privileges", None)
        caps = probe() if callable(probe) else gpu.capabilities
    except DeviceError as e:
        return {"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "error": str(e)}
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
        "sm_clock_range_mhz": [min(clocks), max(clocks)] if clocks else None,
    }


def _versions(nvml: Any) -> dict[str, str | None]:
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


def _estimate_entry() -> dict[str, Any]:
    from greentrain.device.estimate import CPUEstimate

    estimate = CPUEstimate()
    return {
        "cpu_model": estimate.cpu_model,
        "tdp_w": estimate.tdp_w,
        "tdp_source": estimate.tdp.source,
        "model": "power = TDP x (0.1 + 0.9 x load^3) (CodeCarbon's machine cpu_load model)",
    }


def machine_report(devices: DeviceSet, rapl_root: str | Path | None = "/sys/class/powercap") -> dict[str, Any]:
    """Everything ``greentrain doctor`` shows, JSON-serialisable."""
    from greentrain.device.rapl import find_rapl_domains

    rapl, _ = find_rapl_domains(rapl_root) if rapl_root is not None else ([], [])
    gpus = [_gpu_entry(g) for g in devices.gpus]
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
    }
