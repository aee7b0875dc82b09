"""Read the runs of a CodeCarbon ``emissions.csv``, whichever version wrote it.

Columns are read by name: those ``REQUIRED`` must be there, the location and
hardware columns are used when present, and columns of versions newer than
any greentrain knows are kept out of the way (listed, not read). A row that
cannot be used (blank, cut short, a value that is not a number or a time,
nothing measured) is skipped with its line number and reason; only a file
with no usable row at all, or whose header lacks a required column, is an
error. CodeCarbon's periodic flushes append the running totals of one run
under the same ``run_id``: the last (longest) of them stands for the run.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path

from greentrain.codecarbon.columns import KNOWN_COLUMNS, REQUIRED
from greentrain.errors import ConfigError
from greentrain.fields import did_you_mean
from greentrain.units import J_PER_KWH
from greentrain.userfile import TRACE_MAX_BYTES, decode_text, read_bytes

__all__ = ["CodeCarbonRun", "SkippedRow", "EmissionsFile", "read_emissions"]

_MAX_REPORTED = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeCarbonRun:
    """One run CodeCarbon recorded."""

    row: int
    """Line of the file (the header is line 1)."""
    ended_at: datetime
    """When the tracker stopped, aware UTC."""
    duration_s: float
    energy_kwh: float
    emissions_kg: float | None = None
    """What CodeCarbon priced the run at, with its own (annual-average) intensity."""
    project_name: str = ""
    run_id: str = ""
    country_iso_code: str = ""
    country_name: str = ""
    region: str = ""
    gpu_model: str = ""
    gpu_count: int | None = None
    gpu_energy_kwh: float | None = None

    @property
    def started_at(self) -> datetime:
        return self.ended_at - timedelta(seconds=self.duration_s)

    @property
    def power_w(self) -> float:
        """Mean draw over the run, everything CodeCarbon counted (CPU, GPU, RAM)."""
        return self.energy_kwh * J_PER_KWH / self.duration_s

    @property
    def gpu_power_w(self) -> float | None:
        """Mean GPU draw, where the file has per-device energy."""
        return None if self.gpu_energy_kwh is None else self.gpu_energy_kwh * J_PER_KWH / self.duration_s


@dataclass(frozen=True, slots=True)
class SkippedRow:
    """A row that could not be used, and why."""

    row: int
    reason: str


@dataclass(slots=True)
class EmissionsFile:
    """What ``read_emissions`` found."""

    path: Path
    columns: tuple[str, ...]
    runs: list[CodeCarbonRun] = field(default_factory=list)
    skipped: list[SkippedRow] = field(default_factory=list)
    unknown_columns: tuple[str, ...] = ()
    """Columns no CodeCarbon version greentrain knows writes: not read."""
    notes: list[str] = field(default_factory=list)


class _RowProblem(ValueError):
    pass


def _number(row: Mapping[str, str | None], column: str, *, required: bool) -> float | None:
    text = (row.get(column) or "").strip()
    if not text:
        if required:
            raise _RowProblem(f"column {column!r} is empty")
        return None
    try:
        value = float(text)
    except ValueError:
        raise _RowProblem(f"column {column!r}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise _RowProblem(f"column {column!r}: {text!r} is not a finite number >= 0")
    return value


def _time(text: str | None, zone: tzinfo) -> datetime:
    text = (text or "").strip()
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _RowProblem(f"column 'timestamp': {text!r} is not an ISO-8601 time") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=zone)).astimezone(UTC)


def _run(row: Mapping[str, str | None], line: int, zone: tzinfo) -> CodeCarbonRun:
    def text(column: str) -> str:
        return (row.get(column) or "").strip()

    duration_s = _number(row, "duration", required=True) or 0.0
    energy_kwh = _number(row, "energy_consumed", required=True) or 0.0
    if duration_s <= 0:
        raise _RowProblem("duration is 0 s: nothing ran")
    if energy_kwh <= 0:
        raise _RowProblem("energy_consumed is 0 kWh: nothing was measured")
    gpus = _number(row, "gpu_count", required=False) if "gpu_count" in row else None
    return CodeCarbonRun(
        row=line, ended_at=_time(row.get("timestamp"), zone), duration_s=duration_s, energy_kwh=energy_kwh,
        emissions_kg=_number(row, "emissions", required=False), project_name=text("project_name"),
        run_id=text("run_id"), country_iso_code=text("country_iso_code"), country_name=text("country_name"),
        region=text("region"), gpu_model=text("gpu_model"), gpu_count=None if gpus is None else int(gpus),
        gpu_energy_kwh=_number(row, "gpu_energy", required=False),
    )


def _check_header(path: Path, header: list[str] | None) -> tuple[str, ...]:
    if not header or not any(name.strip() for name in header):
        raise ConfigError(f"{path}: empty file, no header row (expected CodeCarbon's emissions.csv)")
    names = [name.strip() for name in header]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{path}: column {name!r} appears twice in the header")
        seen.add(name)
    unknown = [name for name in names if name not in KNOWN_COLUMNS]
    for column in REQUIRED:
        if column not in seen:
            hint = did_you_mean(column, unknown)
            raise ConfigError(f"{path}: no column {column!r}{hint}; a CodeCarbon emissions.csv has "
                              f"{', '.join(REQUIRED)}")
    return tuple(unknown)


def _decode(path: Path, data: bytes) -> str:
    """UTF-8 text; a stray byte in a row is blamed on its line and CSV column (the shared reader's message
    for anything else: UTF-16, binary)."""
    try:
        data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        line = data.count(b"\n", 0, e.start) + 1
        header = data.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip().split(",")
        before = next(csv.reader([data[start:e.start].decode("utf-8", errors="replace")]), [""])
        index = len(before) - 1  # the field the byte is in
        if line > 1 and b"\x00" not in data[:4096] and 0 <= index < len(header):
            raise ConfigError(f"{path}:{line}: column {header[index].strip()!r}: byte 0x{data[e.start]:02x} is not "
                              "UTF-8; save the file as UTF-8") from None
    return decode_text(data, str(path))


def read_emissions(path: str | Path, *, timestamps_tz: tzinfo = UTC) -> EmissionsFile:
    """The runs in ``path``; naive timestamps are read in ``timestamps_tz``. ConfigError (one line per
    problem, naming the file and the column or row) when the header is wrong or no row is usable."""
    path = Path(path)
    text = _decode(path, read_bytes(path, what="CodeCarbon emissions file", max_bytes=TRACE_MAX_BYTES))
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as e:
        raise ConfigError(f"{path}:1: not CSV ({e})") from None
    unknown = _check_header(path, header)
    columns = tuple(name.strip() for name in header or [])
    found = EmissionsFile(path=path, columns=columns, unknown_columns=unknown)
    try:
        for values in reader:
            line = reader.line_num
            if not any(v.strip() for v in values):
                found.skipped.append(SkippedRow(line, "empty row"))
                continue
            if len(values) != len(columns):
                found.skipped.append(SkippedRow(line, f"{len(values)} fields, the header has {len(columns)}"))
                continue
            try:
                found.runs.append(_run(dict(zip(columns, values)), line, timestamps_tz))
            except _RowProblem as e:
                found.skipped.append(SkippedRow(line, str(e)))
    except csv.Error as e:
        raise ConfigError(f"{path}:{reader.line_num}: not CSV ({e})") from None
    _merge_flushes(found)
    if not found.runs:
        lines = [f"{path}:{s.row}: {s.reason}" for s in found.skipped[:_MAX_REPORTED]]
        if len(found.skipped) > _MAX_REPORTED:
            lines.append(f"{path}: {len(found.skipped) - _MAX_REPORTED} more unusable rows")
        raise ConfigError("\n".join(lines) if lines else f"{path}: no rows after the header")
    return found


def _merge_flushes(found: EmissionsFile) -> None:
    """Keep one row per ``run_id``: the longest (CodeCarbon's flushes repeat a run's running totals)."""
    best: dict[str, CodeCarbonRun] = {}
    for run in found.runs:
        if run.run_id and (run.run_id not in best or run.duration_s >= best[run.run_id].duration_s):
            best[run.run_id] = run
    kept = [r for r in found.runs if not r.run_id or best[r.run_id] is r]
    for run_id, run in best.items():
        earlier = [r.row for r in found.runs if r.run_id == run_id and r is not run]
        if earlier:
            rows = ", ".join(map(str, earlier))
            found.notes.append(f"run {run_id}: rows {rows} are earlier totals of row {run.row}; row {run.row} used")
    found.runs = kept
