"""Write small Electricity Maps-format traces for the integration tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

_HEADER = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
           "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
           "Data Estimated,Data Estimation Method")


def write_trace(path: Path, zone: str, start: datetime, intensities: Sequence[float]) -> Path:
    """An Electricity Maps export with one row per hour from ``start``."""
    rows = [_HEADER]
    for hour, value in enumerate(intensities):
        t = (start + timedelta(hours=hour)).strftime("%Y-%m-%d %H:%M:%S")
        rows.append(f"{t},X,{zone},{zone},{value},{value * 1.3:.1f},50,40,test,false,")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path
