"""Append one row to a CodeCarbon-compatible ``emissions.csv`` with the csv module.

A new (or empty) file gets the installed CodeCarbon's header, in its order.
An existing file keeps its own header: the row is written in that file's
column order, blank where the file has a column the row does not fill, so a
file an older CodeCarbon began stays one table (CodeCarbon itself would move
such a file aside and start a new one). A blank cell means "not measured",
never 0.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path

from greentrain.codecarbon.columns import installed_columns
from greentrain.errors import ConfigError
from greentrain.userfile import check_writable_dir

__all__ = ["append_row", "check_target", "format_cell"]


def check_target(path: str | Path, *, what: str = "--codecarbon-csv") -> Path:
    """``path`` if a row can be appended there: not a folder, in a writable folder (ConfigError otherwise)."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{what} {target}: is a folder; give a file such as {target / 'emissions.csv'}")
    check_writable_dir(target.parent if str(target.parent) else Path("."), what=what)
    if target.exists() and not os.access(target, os.W_OK):
        raise ConfigError(f"{what} {target}: file is not writable")
    return target


def format_cell(value: object) -> str:
    """A value as CodeCarbon's files spell it: None blank, floats in full precision."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _existing_header(path: Path) -> tuple[list[str] | None, bool]:
    """(the file's header or None when new/empty, whether its last byte is a newline)."""
    if not path.exists() or path.stat().st_size == 0:
        return None, True
    with path.open(encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), None)
    with path.open("rb") as raw:
        raw.seek(-1, os.SEEK_END)
        ends_with_newline = raw.read(1) in (b"\n", b"\r")
    return ([name.strip() for name in header] if header else None), ends_with_newline


def append_row(path: str | Path, values: Mapping[str, object]) -> list[str]:
    """Append ``values`` (column -> value) as one row; returns the columns of ``values`` the file has no
    place for (left out)."""
    target = Path(path)
    header, ends_with_newline = _existing_header(target)
    new = header is None
    columns = list(installed_columns()) if header is None else header
    with target.open("a", encoding="utf-8", newline="") as handle:
        if not ends_with_newline:
            handle.write("\n")
        writer = csv.writer(handle)
        if new:
            writer.writerow(columns)
        writer.writerow([format_cell(values.get(column)) for column in columns])
    return [name for name in values if name not in columns]
