"""One place that turns numbers into text for people: scaled units, durations and times.

Every figure greentrain prints (CLI lines, the demo summary, the HTML
report) goes through these functions, so ``0.02 g`` reads ``20.0 mg`` and
``3600000 J`` reads ``3.60 MJ (1.00 kWh)`` everywhere alike. A value that is
unknown prints as ``unknown`` rather than a misleading 0.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

__all__ = ["format_mass_g", "format_masses_g", "format_energy_j", "format_duration_s", "format_time", "format_scaled",
           "J_PER_WH", "J_PER_KWH", "UNKNOWN"]

J_PER_WH = 3600.0
J_PER_KWH = 3.6e6
"""Joules in a kilowatt-hour: energy (J) / J_PER_KWH × intensity (g/kWh) = emissions (g)."""
UNKNOWN = "unknown"

_MASS = ((1e-3, "mg"), (1.0, "g"), (1e3, "kg"), (1e6, "t"))
_ENERGY = ((1.0, "J"), (1e3, "kJ"), (1e6, "MJ"), (1e9, "GJ"))
_ENERGY_WH = ((1.0, "Wh"), (1e3, "kWh"), (1e6, "MWh"))


def format_scaled(value: float | None, scales: tuple[tuple[float, str], ...], digits: int = 3) -> str:
    """``value`` in the largest unit of ``scales`` (ascending (factor, name)) that keeps it >= 1.

    ``digits`` significant digits, at least one; 0 prints in the smallest unit; None or NaN is ``unknown``.
    """
    if value is None or not math.isfinite(value):
        return UNKNOWN
    if value == 0:
        base = next((name for factor, name in scales if factor == 1.0), scales[0][1])
        return f"0 {base}"
    index = 0
    for i, (factor, _name) in enumerate(scales):
        if abs(value) >= factor:
            index = i
    bumped = False
    while True:
        factor, name = scales[index]
        scaled = value / factor
        magnitude = max(abs(scaled), 1.0) if bumped else abs(scaled)
        decimals = max(0, digits - 1 - int(math.floor(math.log10(magnitude))))
        rounded = round(scaled, decimals)
        # 0.99996 g rounds to 1000 mg: say 1.00 g instead
        if index + 1 < len(scales) and abs(rounded) * factor >= scales[index + 1][0]:
            index, bumped = index + 1, True
            continue
        return f"{rounded:,.{decimals}f} {name}"


def format_mass_g(grams: float | None, suffix: str = "CO2eq") -> str:
    """Emissions: ``0.02`` → ``20.0 mgCO2eq``; ``1234`` → ``1.23 kgCO2eq``; negative values keep their sign."""
    text = format_scaled(grams, _MASS)
    return text if text == UNKNOWN else text + suffix


def format_masses_g(grams: list[float | None], suffix: str = "CO2eq") -> list[str]:
    """Several emissions in ONE unit, the one that suits the largest: ``[0.02, 0.0001]`` →
    ``['20.0 mgCO2eq', '0.100 mgCO2eq']`` (never ``0 g`` beside ``mg``). None is ``unknown``."""
    known = [abs(g) for g in grams if g is not None and math.isfinite(g) and g != 0]
    if not known:
        return [format_mass_g(g, suffix) for g in grams]
    largest = max(known)
    factor, name = _MASS[0]
    for f, n in _MASS:
        if largest >= f:
            factor, name = f, n
    out = []
    for g in grams:
        if g is None or not math.isfinite(g):
            out.append(UNKNOWN)
            continue
        if g == 0:
            out.append(f"0 {name}{suffix}")
            continue
        scaled = g / factor
        decimals = max(0, min(6, max(2 - int(math.floor(math.log10(largest / factor))),
                                     *(1 - int(math.floor(math.log10(k / factor))) for k in known))))
        out.append(f"{scaled:,.{decimals}f} {name}{suffix}")
    return out


def format_energy_j(joules: float | None, with_wh: bool = True) -> str:
    """Energy: ``3.6e6`` → ``3.60 MJ (1.00 kWh)``; the Wh figure scales too (Wh, kWh, MWh)."""
    text = format_scaled(joules, _ENERGY)
    if text == UNKNOWN or not with_wh:
        return text
    return f"{text} ({format_scaled(joules / J_PER_WH, _ENERGY_WH)})"  # type: ignore[operator]


def format_duration_s(seconds: float | None) -> str:
    """A duration for people: ``42 s``, ``12 min``, ``3.5 h``, ``2.1 d``."""
    if seconds is None or not math.isfinite(seconds):
        return UNKNOWN
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    if s < 10:
        return f"{sign}{s:.2g} s"
    if s < 60:
        return f"{sign}{s:.0f} s"
    if s < 3600:
        return f"{sign}{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{sign}{s / 3600:.1f} h"
    return f"{sign}{s / 86400:.1f} d"


def format_time(when: datetime | None, *, simulated: bool = False, seconds: bool = False) -> str:
    """``2026-11-22 06:00 UTC``; ``simulated=True`` says so (a replayed calendar is not wall time)."""
    if when is None:
        return "-"
    text = when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M") + " UTC"
    return f"{text} (simulated)" if simulated else text
