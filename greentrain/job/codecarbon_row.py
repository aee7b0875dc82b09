"""``--codecarbon-csv PATH``: a job also appends a CodeCarbon-compatible row when it ends.

Dashboards and scripts built on CodeCarbon's ``emissions.csv`` keep working
for jobs greentrain runs. One row per process of the job, like one row per
CodeCarbon tracker: a relaunched job (a checkpoint pause, a scheduler
requeue) writes one row per segment, each with that segment's own energy
and emissions, so the rows add up to the job's totals. ``project_name`` is
the job label; ``experiment_id`` is the same for every segment of one job.

The figures are greentrain's own (the ledger behind the end-of-run summary):
energy as measured by its monitor, emissions priced with its carbon signal;
blank where unknown, never 0. The CPU/GPU split follows the monitor's
per-device energy; RAM is not measured (blank). ``timestamp`` is when the
segment ended, in UTC on the job's clock (CodeCarbon writes local time).
A failure to write is a warning: it never fails a finished run.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import uuid
from datetime import datetime
from pathlib import Path

from greentrain.codecarbon import append_row, location_for
from greentrain.codecarbon.columns import installed_version
from greentrain.engine.collaborators import EnergyMonitor
from greentrain.engine.core import EngineCore
from greentrain.engine.jobsummary import job_figures
from greentrain.monitor.monitor import Monitor
from greentrain.units import J_PER_KWH

__all__ = ["CodeCarbonRecorder"]

log = logging.getLogger(__name__)


def _kwh(joules: float | None) -> float | None:
    return None if joules is None else joules / J_PER_KWH


def _machine() -> dict[str, object]:
    """What CodeCarbon records about the machine, where it can be read cheaply."""
    from greentrain.device.cpu_tdp import detect_cpu_model

    values: dict[str, object] = {"os": platform.platform(), "python_version": platform.python_version(),
                                 "codecarbon_version": installed_version(), "cpu_count": os.cpu_count(),
                                 "tracking_mode": "machine", "on_cloud": "N", "pue": 1.0}
    try:
        values["cpu_model"] = detect_cpu_model()
    except OSError:
        pass
    try:
        import psutil  # a dependency of codecarbon

        values["ram_total_size"] = round(psutil.virtual_memory().total / 2**30, 3)
    except Exception:  # no psutil, or no /proc: leave it blank
        pass
    return values


class CodeCarbonRecorder:
    """Takes the job's totals when the job is built and appends the difference as one row when it closes."""

    def __init__(self, path: str | Path, engine: EngineCore, monitor: EnergyMonitor, *, job: str,
                 zone: str | None) -> None:
        self.path = Path(path)
        self.engine, self.monitor, self.job, self.zone = engine, monitor, job, zone
        self.started_at: datetime = engine.clock.now()
        self.energy_j0 = engine.ledger.energy_j
        self.emissions_g0 = engine.ledger.emissions_g

    def row(self) -> dict[str, object]:
        """The row for this process of the job, column -> value (None: blank)."""
        figures = job_figures(self.engine)
        ended_at = self.engine.clock.now()
        duration_s = max(0.0, (ended_at - self.started_at).total_seconds())
        energy_j = None if figures.energy_j is None else max(0.0, figures.energy_j - self.energy_j0)
        emissions_g = None if figures.emissions_g is None else max(0.0, figures.emissions_g - self.emissions_g0)
        gpu_j, cpu_j, gpus = self._split(energy_j)
        country, iso_code, region = location_for(self.zone)

        def per_s(value: float | None) -> float | None:
            return None if value is None or duration_s <= 0 else value / duration_s

        return {
            **_machine(),
            "timestamp": ended_at.strftime("%Y-%m-%dT%H:%M:%S"), "project_name": self.job,
            "run_id": str(uuid.uuid4()), "experiment_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"greentrain:{self.job}")),
            "duration": duration_s, "emissions": None if emissions_g is None else emissions_g / 1000,
            "emissions_rate": per_s(None if emissions_g is None else emissions_g / 1000),
            "cpu_power": per_s(cpu_j), "gpu_power": per_s(gpu_j), "cpu_energy": _kwh(cpu_j), "gpu_energy": _kwh(gpu_j),
            "energy_consumed": _kwh(energy_j), "water_consumed": 0.0 if energy_j is not None else None, "wue": 0.0,
            "country_name": country, "country_iso_code": iso_code, "region": region,
            "gpu_count": len(gpus), "gpu_model": f"{len(gpus)} x {gpus[0]}" if gpus else "",
        }

    def _split(self, energy_j: float | None) -> tuple[float | None, float | None, list[str]]:
        """(GPU J, CPU J, GPU models): ``energy_j`` shared as the monitor's per-device energy is."""
        readings = self.monitor.readings() if isinstance(self.monitor, Monitor) else []
        gpus = [r.model or r.name for r in readings if r.kind == "gpu"]
        gpu_j = sum(r.energy_j for r in readings if r.kind == "gpu")
        cpu_j = sum(r.energy_j for r in readings if r.kind == "cpu")
        if energy_j is None or gpu_j + cpu_j <= 0:
            return None, None, gpus
        share = gpu_j / (gpu_j + cpu_j)
        return energy_j * share, energy_j * (1 - share), gpus

    def write(self) -> None:
        """Append the row; a failure is said on stderr and in the log, never raised."""
        try:
            append_row(self.path, self.row())
        except Exception as e:  # any failure here: the job itself is done and must not fail for a report row
            message = f"greentrain: warning: --codecarbon-csv {self.path}: row not written ({e})"
            log.warning(message)
            print(message, file=sys.stderr)
