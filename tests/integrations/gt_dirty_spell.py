"""An Electricity Maps CSV with a dirty spell, replayed through the real CSV provider in the framework tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

__all__ = ["T0", "dirty_spell_trace"]

T0 = datetime(2022, 3, 1, tzinfo=UTC)
"""Clean from T0, dirty (500 g/kWh) from T0+1h to T0+3h, clean after; three clean days of history before."""

_HEADER = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
           "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
           "Data Estimated,Data Estimation Method")


def dirty_spell_trace(folder: Path) -> Path:
    """Write the trace into ``folder``; returns its path."""
    first = T0 - timedelta(days=3)
    values = [100.0] * 72 + [100.0, 500.0, 500.0] + [100.0] * 45
    rows = [_HEADER] + [f"{first + timedelta(hours=i):%Y-%m-%d %H:%M:%S},Great Britain,Great Britain,GB,{v},{v},"
                        f"50,40,test,false," for i, v in enumerate(values)]
    path = folder / "gb-dirty-spell.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path
