"""Where a number came from. Every energy, power and intensity figure carries one."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Source"]


class Source(StrEnum):
    """Provenance label, from most to least direct."""

    MEASURED = "measured"  # a hardware energy counter
    INTEGRATED = "integrated"  # power samples integrated over time
    INTERPOLATED = "interpolated"  # a share of a measurement finer than the hardware resolves (short steps)
    ESTIMATED = "estimated"  # a model (e.g. utilisation x TDP)
    STATIC = "static"  # an annual/regional average
    FORECAST = "forecast"  # a prediction of a future value
