"""Tables that fit the terminal, never cut: a rich table when it fits; else the columns that are the
same in every row move above it as ``key: value`` lines; else one ``key: value`` block per row.

A table squeezed below its natural width cuts cells (``gCO2eq/…``, a GPU name
cut to three characters). These steps keep every value whole, so 80 columns
read as well as 200.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["print_table"]


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str]) -> Table:
    from rich.table import Table

    table = Table(title=title or None)
    for name in columns:
        table.add_column(name, justify="right" if name in right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table


def _fits(console: Console, table: Table) -> bool:
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(1 << 20), table)  # unclamped width
    return natural.maximum <= console.width


def print_table(console: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]],
                right: Sequence[str] = ()) -> None:
    """Print ``rows`` under ``columns`` on ``console`` within its width, every cell whole."""
    table = _table(title, columns, rows, right)
    if _fits(console, table):
        console.print(table)
        return
    constant = [i for i in range(len(columns)) if len(rows) > 1 and len({row[i] for row in rows}) == 1]
    varying = [i for i in range(len(columns)) if i not in constant]
    if constant and varying:
        narrow = _table("", [columns[i] for i in varying], [[row[i] for i in varying] for row in rows], right)
        if _fits(console, narrow):
            console.print(title, style="bold", markup=False, highlight=False)
            for i in constant:
                console.print(f"{columns[i]}: {rows[0][i]}", markup=False, highlight=False, soft_wrap=True)
            console.print(narrow)
            return
    console.print(title, style="bold", markup=False, highlight=False)
    label_w = max(len(name) for name in columns)
    for n, row in enumerate(rows):
        if n:
            console.print("")
        for name, value in zip(columns, row, strict=True):
            console.print(f"  {name:<{label_w}}  {value}", markup=False, highlight=False, soft_wrap=True)
