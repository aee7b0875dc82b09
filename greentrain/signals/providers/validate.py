"""Checks every provider applies to what an API sent back, before anyone sees it.

A value that is missing, not a number, negative, NaN or absurd (> 5000 g/kWh,
above any real grid), a timestamp without a timezone or out of order, or a
zone other than the one asked for becomes a ``SignalError`` naming the field,
so the fallback chain takes over instead of a policy acting on garbage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from greentrain.errors import SignalError
from greentrain.signals.base import IntensityPoint
from greentrain.userfile import JSONValue

__all__ = ["MAX_G_PER_KWH", "field", "intensity", "timestamp", "in_order", "same_zone", "as_mapping", "as_list"]

MIN_YEAR, MAX_YEAR = 1970, 2200
"""Plausible years of a carbon reading or forecast; others are faults (and overflow datetime arithmetic)."""
MAX_G_PER_KWH = 5000.0
"""No real grid exceeds this (pure lignite is ~1,100 g/kWh); larger values are faults."""


def as_mapping(value: JSONValue | Mapping[str, JSONValue], where: str) -> Mapping[str, JSONValue]:
    """``value`` if it is a JSON object, else SignalError naming ``where``."""
    if not isinstance(value, Mapping):
        raise SignalError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def as_list(value: JSONValue, where: str) -> list[JSONValue]:
    """``value`` if it is a JSON array, else SignalError naming ``where``."""
    if not isinstance(value, list):
        raise SignalError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def field(obj: JSONValue | Mapping[str, JSONValue], key: str, where: str) -> JSONValue:
    """``obj[key]`` of a JSON object; SignalError if ``obj`` is not an object or lacks ``key``."""
    mapping = as_mapping(obj, where)
    if key not in mapping:
        raise SignalError(f"{where}: missing field {key!r}")
    return mapping[key]


def intensity(value: object, where: str, scale: float = 1.0) -> float:
    """A finite g/kWh value in [0, MAX_G_PER_KWH] after multiplying by ``scale``."""
    if value is None:
        raise SignalError(f"{where}: no value (null) for this zone and time")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SignalError(f"{where}: not a number ({type(value).__name__})")
    try:
        converted = float(value) * scale
    except OverflowError:
        raise SignalError(f"{where}: number too large") from None
    if not math.isfinite(converted):
        raise SignalError(f"{where}: not a finite number")
    if converted < 0 or converted > MAX_G_PER_KWH:
        raise SignalError(f"{where}: {converted:.6g} g/kWh is outside [0, {MAX_G_PER_KWH:g}]")
    return converted


def timestamp(value: object, where: str) -> datetime:
    """An ISO-8601 time with a zone ('Z' or offset) as aware UTC."""
    if not isinstance(value, str):
        raise SignalError(f"{where}: expected an ISO-8601 time string, got {type(value).__name__}")
    if len(value) > 64:
        raise SignalError(f"{where}: time string of {len(value)} characters is not an ISO-8601 time")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise SignalError(f"{where}: {value[:40]!r} is not an ISO-8601 time") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise SignalError(f"{where}: {value[:40]!r} has no timezone")
    # Years 0001 and 9999 overflow as soon as an interval is added; no grid reading is from outside this.
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise SignalError(f"{where}: year {parsed.year} is outside {MIN_YEAR}..{MAX_YEAR}")
    return parsed.astimezone(UTC)


def in_order(points: Sequence[IntensityPoint], where: str) -> list[IntensityPoint]:
    """``points`` as a list, if starts strictly increase and every interval is non-empty."""
    for i, point in enumerate(points):
        if point.end <= point.start:
            raise SignalError(f"{where}: interval {i} ends at or before it starts")
        if i and point.start <= points[i - 1].start:
            raise SignalError(f"{where}: timestamps out of order at item {i} ({point.start.isoformat()})")
    return list(points)


def same_zone(echoed: object, asked: str, where: str) -> None:
    """Refuse a body that answers for another zone than the one we asked for."""
    if echoed is not None and str(echoed).upper() != asked.upper():
        raise SignalError(f"{where}: answered for zone {str(echoed)[:40]!r}, asked for {asked!r}")
