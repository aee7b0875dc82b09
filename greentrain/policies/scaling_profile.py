"""A job's scaling profile: throughput and power at each replica count.

Carbon scaling (an elastic data-parallel job that runs more replicas while the
grid is clean) and the fleet planner both need to know what one more replica
buys and costs. That is measured, never assumed linear: a profile is a CSV

    replicas,throughput,power_w
    1,227980.7,123.8
    2,433151.5,236.6

where ``throughput`` is the whole job's work per second (any unit) and
``power_w`` the whole job's draw at that count. An optional ``source`` column
labels each row (``measured``, ``estimated``, ...); other columns are ignored.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.provenance import Source
from greentrain.userfile import TRACE_MAX_BYTES, read_text

__all__ = ["ScalingPoint", "ScalingProfile", "parse_scaling_profile", "load_scaling_profile", "format_scaling_profile"]

_COLUMNS = ("replicas", "throughput", "power_w")


@dataclass(frozen=True, slots=True)
class ScalingPoint:
    """The job at one replica count."""

    replicas: int
    throughput: float
    """Whole job's work per second, in the workload's own unit."""
    power_w: float
    """Whole job's draw, watts."""
    source: Source = Source.MEASURED


@dataclass(frozen=True, slots=True)
class ScalingProfile:
    """Points sorted by replica count (strictly increasing, each count once)."""

    points: tuple[ScalingPoint, ...]
    origin: str = "profile"
    """Where the profile came from (a file path, 'measured', ...), for messages."""

    def __post_init__(self) -> None:
        if not self.points:
            raise ConfigError(f"{self.origin}: scaling profile has no rows")
        counts = [p.replicas for p in self.points]
        if counts != sorted(set(counts)):
            raise ConfigError(f"{self.origin}: replica counts must be strictly increasing, got {counts}")

    @property
    def replica_counts(self) -> tuple[int, ...]:
        return tuple(p.replicas for p in self.points)

    def point(self, replicas: int) -> ScalingPoint:
        """The point at exactly ``replicas``; ConfigError listing the valid counts otherwise."""
        for p in self.points:
            if p.replicas == replicas:
                return p
        valid = ", ".join(map(str, self.replica_counts))
        raise ConfigError(f"{self.origin}: {replicas} replicas is not in the scaling profile; valid: {valid}")

    def speed(self, replicas: int, reference: int) -> float:
        """Work rate at ``replicas`` relative to ``reference`` (1.0 at the reference; 0 at 0 replicas)."""
        if replicas == 0:
            return 0.0
        return self.point(replicas).throughput / self.point(reference).throughput

    def power_w(self, replicas: int) -> float:
        """Whole job's draw at ``replicas`` (0 W at 0: released replicas draw nothing)."""
        return 0.0 if replicas == 0 else self.point(replicas).power_w

    def within(self, low: int, high: int) -> ScalingProfile:
        """The points with ``low <= replicas <= high``."""
        kept = tuple(p for p in self.points if low <= p.replicas <= high)
        if not kept:
            raise ConfigError(f"{self.origin}: no replica count between {low} and {high}; "
                              f"the profile has {', '.join(map(str, self.replica_counts))}")
        return ScalingProfile(kept, self.origin)


def parse_scaling_profile(text: str, origin: str) -> ScalingProfile:
    """Parse CSV ``text``; every bad row is reported at once, one line each naming ``origin`` and the row."""
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ConfigError(f"{origin}: scaling profile lacks column(s) {', '.join(missing)}; "
                          f"the header is {','.join(_COLUMNS)}")
    points: list[ScalingPoint] = []
    problems: list[str] = []
    for row_no, row in enumerate(reader, start=2):
        point, why = _row_point(row)
        if why:
            problems.append(f"{origin}: row {row_no}: {why}")
        elif point is not None:
            if points and point.replicas <= points[-1].replicas:
                problems.append(f"{origin}: row {row_no}: replicas {point.replicas} after {points[-1].replicas}; "
                                "list each count once, in increasing order")
            points.append(point)
    if problems:
        raise ConfigError("\n".join(problems))
    return ScalingProfile(tuple(points), origin)


def _row_point(row: dict[str, str | None]) -> tuple[ScalingPoint | None, str | None]:
    if not any((v or "").strip() for v in row.values()):
        return None, None  # a blank line
    cells = {c: (row.get(c) or "").strip() for c in _COLUMNS}
    empty = [c for c, v in cells.items() if not v]
    if empty:
        return None, f"missing {', '.join(empty)}"
    try:
        replicas = int(cells["replicas"])
    except ValueError:
        return None, f"replicas {cells['replicas']!r} is not a whole number"
    try:
        throughput, power_w = float(cells["throughput"]), float(cells["power_w"])
    except ValueError:
        return None, "throughput and power_w must be numbers"
    if replicas < 1:
        return None, f"replicas must be >= 1, got {replicas}"
    for name, value in (("throughput", throughput), ("power_w", power_w)):
        if not math.isfinite(value) or value <= 0:
            return None, f"{name} must be a finite number > 0, got {value}"
    label = (row.get("source") or "").strip() or Source.MEASURED.value
    try:
        source = Source(label)
    except ValueError:
        return None, f"source {label!r} is not one of {', '.join(s.value for s in Source)}"
    return ScalingPoint(replicas, throughput, power_w, source), None


def load_scaling_profile(path: str | Path) -> ScalingProfile:
    """Read a scaling-profile CSV (see the module docstring); ConfigError naming the file and row."""
    return parse_scaling_profile(read_text(path, what="scaling profile", max_bytes=TRACE_MAX_BYTES), str(path))


def format_scaling_profile(points: Iterable[ScalingPoint]) -> str:
    """CSV text of ``points`` with their ``source`` labels (the format ``parse_scaling_profile`` reads)."""
    lines = ["replicas,throughput,power_w,source"]
    lines += [f"{p.replicas},{p.throughput:.6g},{p.power_w:.6g},{p.source.value}" for p in points]
    return "\n".join(lines) + "\n"
