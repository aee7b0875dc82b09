"""``greentrain fleet simulate --partition NAME=ZONE:GPUS:TRACE``: the partitions of a fleet on several grids.

Each ``--partition`` names a partition, its grid zone, its GPUs and the hourly
trace of its zone (partitions on one zone share it: the trace may be given on
one of them only). The single ``--trace T --capacity-gpus C`` form is one
partition, ``default``, on the trace's zone. Every problem (a spec that does
not parse, a zone without a trace, a trace that cannot be read, traces that do
not start at the same hour) is listed at once, one line each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.fleet.jobs import DEFAULT_PARTITION
from greentrain.fleet.model import Partition
from greentrain.signals.base import IntensityPoint

__all__ = ["FleetSites", "PartitionSpec", "parse_partition_spec", "load_sites"]

_FORM = "NAME=ZONE:GPUS:TRACE (e.g. north=NO:16:NO_2022_hourly.csv)"


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """One ``--partition`` as given."""

    name: str
    zone: str
    gpus: int
    trace: Path | None


@dataclass(slots=True)
class FleetSites:
    """The partitions and the trace of each zone they sit on; ``problems``: what was wrong, one line each."""

    partitions: dict[str, Partition] = field(default_factory=dict)
    traces: dict[str, list[IntensityPoint]] = field(default_factory=dict)
    trace_paths: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    unreadable: set[str] = field(default_factory=set)
    """Names of partitions whose spec did not parse (so the jobs file is not blamed for naming them)."""

    @property
    def capacity(self) -> dict[str, int]:
        return {name: p.capacity_gpus for name, p in self.partitions.items()}

    def names_for_jobs(self) -> dict[str, int]:
        """Partition -> GPUs to check the jobs file against: a partition whose spec did not parse counts as
        known and as wide as the widest (its own line already says what is wrong)."""
        widest = max(self.capacity.values(), default=1)
        return {name: widest for name in self.unreadable if name} | self.capacity

    @property
    def first_zone(self) -> str:
        """The zone of the first partition: its trace gives the simulation's hours."""
        return next(iter(self.partitions.values())).zone


def parse_partition_spec(spec: str) -> PartitionSpec | str:
    """The spec, or the line saying why it does not parse."""
    name, sep, rest = spec.partition("=")
    parts = rest.split(":", 2)
    if not sep or not name.strip() or len(parts) < 2 or not parts[0].strip():
        return f"--partition {spec!r}: expected {_FORM}"
    gpus_text = parts[1].strip()
    if not gpus_text.isdigit() or int(gpus_text) < 1:
        return f"--partition {spec!r}: GPUS {gpus_text!r} is not a whole number >= 1; expected {_FORM}"
    trace = parts[2].strip() if len(parts) > 2 else ""
    return PartitionSpec(name.strip(), parts[0].strip(), int(gpus_text), Path(trace) if trace else None)


def load_sites(specs: tuple[str, ...], trace: Path | None, capacity_gpus: int | None, column: str) -> FleetSites:
    """The partitions from ``--partition`` specs, or the one of ``--trace``/``--capacity-gpus``."""
    from greentrain.signals.trace import load_trace

    sites = FleetSites()
    if specs and (trace is not None or capacity_gpus is not None):
        sites.problems.append("--partition: give partitions or --trace with --capacity-gpus, not both")
    if not specs:
        return _single(sites, trace, capacity_gpus, column)
    parsed: list[PartitionSpec] = []
    for spec in specs:
        result = parse_partition_spec(spec)
        if isinstance(result, str):
            sites.problems.append(result)
            if spec.partition("=")[1]:
                sites.unreadable.add(spec.partition("=")[0].strip())
        elif result.name in {p.name for p in parsed}:
            sites.problems.append(f"--partition {spec!r}: partition {result.name!r} is given twice")
        else:
            parsed.append(result)
    for p in parsed:
        sites.partitions[p.name] = Partition(p.name, p.gpus, p.zone)
        if p.trace is None:
            continue
        known = sites.trace_paths.get(p.zone)
        if known is not None and known != str(p.trace):
            sites.problems.append(f"--partition {p.name}: zone {p.zone} already has the trace {known}")
            continue
        if known is None:
            sites.trace_paths[p.zone] = str(p.trace)
            try:
                sites.traces[p.zone] = load_trace(p.trace, column)
            except ConfigError as e:
                sites.problems.append(f"--partition {p.name}: {str(e).splitlines()[0]}")
    for p in parsed:
        if p.zone not in sites.trace_paths:
            sites.problems.append(f"--partition {p.name}: zone {p.zone} has no trace (give {p.name}={p.zone}:"
                                  f"{p.gpus}:TRACE, or the trace on another partition of {p.zone})")
            sites.trace_paths[p.zone] = ""  # one line per zone
    _check_starts(sites)
    return sites


def _single(sites: FleetSites, trace: Path | None, capacity_gpus: int | None, column: str) -> FleetSites:
    from greentrain.signals.trace import load_trace

    if trace is None:
        sites.problems.append("--trace: needed (or give --partition NAME=ZONE:GPUS:TRACE)")
    if capacity_gpus is None:
        sites.problems.append("--capacity-gpus: needed with --trace")
    elif capacity_gpus < 1:
        sites.problems.append(f"--capacity-gpus: must be >= 1, got {capacity_gpus}")
    if trace is None:
        return sites
    try:
        points = load_trace(trace, column)
    except ConfigError as e:
        sites.problems.append(str(e).splitlines()[0])
        return sites
    zone = points[0].zone if points else ""
    sites.traces[zone], sites.trace_paths[zone] = points, str(trace)
    if capacity_gpus is not None and capacity_gpus >= 1:
        sites.partitions[DEFAULT_PARTITION] = Partition(DEFAULT_PARTITION, capacity_gpus, zone)
    return sites


def _check_starts(sites: FleetSites) -> None:
    """Every zone's trace on the same hours: the simulation reads them all by one clock."""
    starts = {zone: points[0].start for zone, points in sites.traces.items() if points}
    if len(set(starts.values())) > 1:
        listed = ", ".join(f"{zone} {when.isoformat()}" for zone, when in starts.items())
        sites.problems.append(f"--partition: the traces must start at the same hour ({listed})")
