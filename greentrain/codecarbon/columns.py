"""The columns of CodeCarbon's ``emissions.csv``, version by version.

Units (all versions): ``duration`` seconds, ``emissions`` kg CO2eq,
``*_energy`` and ``energy_consumed`` kWh, ``*_power`` W, ``emissions_rate``
kg/s, ``ram_total_size`` GB. ``timestamp`` is when the tracker stopped, in
the tracking machine's local time, without a zone.
"""

from __future__ import annotations

import dataclasses
import functools

__all__ = ["REQUIRED", "V1_COLUMNS", "V2_COLUMNS", "V3_COLUMNS", "KNOWN_COLUMNS", "installed_columns",
           "installed_version"]

REQUIRED = ("timestamp", "duration", "energy_consumed")
"""What ``greentrain whatif`` needs of every file: when a run ended, how long it ran, the energy it used."""

V1_COLUMNS = ("timestamp", "experiment_id", "project_name", "duration", "emissions", "energy_consumed",
              "country_name", "country_iso_code", "region", "on_cloud", "cloud_provider", "cloud_region")
"""The early 1.x files: no power or per-device energy, no run id, no hardware."""

V2_COLUMNS = ("timestamp", "project_name", "run_id", "duration", "emissions", "emissions_rate", "cpu_power",
              "gpu_power", "ram_power", "cpu_energy", "gpu_energy", "ram_energy", "energy_consumed", "country_name",
              "country_iso_code", "region", "cloud_provider", "cloud_region", "os", "python_version", "cpu_count",
              "cpu_model", "gpu_count", "gpu_model", "longitude", "latitude", "ram_total_size", "tracking_mode",
              "on_cloud")
"""2.x files (2022): per-device power and energy, hardware, no ``codecarbon_version`` yet."""

V3_COLUMNS = ("timestamp", "project_name", "run_id", "experiment_id", "duration", "emissions", "emissions_rate",
              "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy", "ram_energy", "energy_consumed",
              "water_consumed", "country_name", "country_iso_code", "region", "cloud_provider", "cloud_region", "os",
              "python_version", "codecarbon_version", "cpu_count", "cpu_model", "gpu_count", "gpu_model",
              "longitude", "latitude", "ram_total_size", "tracking_mode", "cpu_utilization_percent",
              "gpu_utilization_percent", "ram_utilization_percent", "ram_used_gb", "on_cloud", "pue", "wue")
"""CodeCarbon 3.3.2's columns (the version greentrain depends on), used when its package cannot be read."""

KNOWN_COLUMNS = frozenset(V1_COLUMNS + V2_COLUMNS + V3_COLUMNS + ("codecarbon_version", "pue"))
"""Every column name a CodeCarbon release is known to write."""


@functools.cache
def installed_columns() -> tuple[str, ...]:
    """The columns of the installed CodeCarbon's ``EmissionsData``, in its order (``V3_COLUMNS`` without it)."""
    try:
        from codecarbon.output_methods.emissions_data import EmissionsData
    except Exception:  # codecarbon missing or reorganised: the version we depend on
        return V3_COLUMNS
    return tuple(f.name for f in dataclasses.fields(EmissionsData))


@functools.cache
def installed_version() -> str:
    """The installed CodeCarbon's version ('3.3.2'), or '' when it cannot be read."""
    try:
        from importlib.metadata import version

        return version("codecarbon")
    except Exception:
        return ""
