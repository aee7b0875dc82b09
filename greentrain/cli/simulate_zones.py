"""``greentrain simulate --trace ZONE=FILE --trace ZONE=FILE ...``: one job across several grid zones.

Each ``--trace`` gives a zone and the hourly trace of its grid; the first is
the job's home. A bare ``--trace FILE`` is the one-zone simulator. Every
problem with the traces (a value that does not parse, a zone given twice, a
file that cannot be read or has no rows, a trace that does not cover a start
and its deadline) is listed at once, one line each (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from greentrain.errors import ConfigError
from greentrain.sim.replay import TraceIndex
from greentrain.sim.zones import ZoneResult
from greentrain.sim.zones_report import zone_run_to_json, zones_summary

__all__ = ["TraceSpec", "load_zone_traces", "parse_trace_specs", "print_zones", "zones_output"]

_FORM = "FILE, or ZONE=FILE for each of several zones (e.g. GB=GB_2022_hourly.csv)"


@dataclass(frozen=True, slots=True)
class TraceSpec:
    """One ``--trace`` as given: its zone (None for a bare FILE) and file."""

    zone: str | None
    path: Path
    text: str


def parse_trace_specs(values: Sequence[str]) -> tuple[list[TraceSpec], list[str]]:
    """The specs, and a line for each value that does not parse or repeats a zone."""
    specs: list[TraceSpec] = []
    problems: list[str] = []
    for text in values:
        zone, sep, file = text.partition("=")
        if not sep or Path(text).is_file():
            specs.append(TraceSpec(None, Path(text), text))
        elif not zone.strip() or not file.strip() or "/" in zone:
            problems.append(f"--trace {text!r}: expected {_FORM}")
        elif zone.strip().upper() in {(s.zone or "").upper() for s in specs}:
            problems.append(f"--trace {text!r}: zone {zone.strip()} is given twice")
        else:
            specs.append(TraceSpec(zone.strip(), Path(file.strip()), text))
    if len(values) > 1:
        for spec in specs:
            if spec.zone is None:
                problems.append(f"--trace {spec.text!r}: with several traces give each as ZONE=FILE")
    return specs, problems


def load_zone_traces(specs: Sequence[TraceSpec], column: str, problems: list[str]) -> dict[str, TraceIndex]:
    """Zone -> its trace, for the specs that load; a line in ``problems`` for each that does not."""
    from greentrain.signals.trace import load_trace

    traces: dict[str, TraceIndex] = {}
    for spec in specs:
        label = f"--trace {spec.text!r}"
        if not spec.path.is_file():
            problems.append(f"{label}: no such file {spec.path}")
            continue
        try:
            points = load_trace(spec.path, column)
        except ConfigError as e:
            problems.append(f"{label}: {str(e).splitlines()[0]}")
            continue
        if not points:
            problems.append(f"{label}: {spec.path} has no rows")
            continue
        traces[spec.zone or points[0].zone] = TraceIndex(points, str(spec.path))
    return traces


def check_cover(traces: dict[str, TraceIndex], starts: Sequence[datetime], horizon: timedelta,
                problems: list[str]) -> None:
    """A line for each trace that lacks a start's hour or ends before a start's deadline (the first only)."""
    for zone, trace in traces.items():
        for start in starts:
            try:
                trace.index(start, "--start")
                trace.require_cover(start, start + horizon, "the deadline")
            except ConfigError as e:
                problems.append(f"--trace {zone}: {e}")
                break


def zones_output(results: list[ZoneResult], policy_name: str, zones: Sequence[str], summary_extra: dict[str, Any],
                 as_json: bool) -> None:
    """Print the runs across zones: one JSON object {runs, summary}, or a table and a summary line."""
    summary = zones_summary(results, policy_name, zones)
    summary.update(summary_extra)
    if as_json:
        click.echo(json.dumps({"runs": [zone_run_to_json(r) for r in results], "summary": summary}))
    else:
        print_zones(results, summary)


def print_zones(results: list[ZoneResult], summary: dict[str, Any]) -> None:
    from rich.console import Console

    from greentrain.cli.tables import print_table
    from greentrain.units import format_mass_g

    def grams(value: float) -> str:
        return format_mass_g(value, suffix="")

    columns = ("start", "finished", "met", "zones", "moves", "policy CO2eq", "stay-home", "greenest-start",
               "best-zone oracle")
    rows = []
    for r in results:
        ledger = r.run.ledger
        path: list[str] = []
        for interval in ledger.schedule:
            if not path or path[-1] != interval.zone:
                path.append(interval.zone or "?")
        rows.append([r.run.start.strftime("%m-%d %H:%M"),
                     ledger.finished_at.strftime("%m-%d %H:%M") if ledger.finished_at else "-",
                     "yes" if r.run.deadline_met else "NO", ">".join(path) or "-", str(ledger.migrations),
                     grams(ledger.emissions_g), grams(r.stay_home.ledger.emissions_g),
                     f"{grams(r.greenest_at_start.ledger.emissions_g)} {r.greenest_zone}",
                     grams(min(o.emissions_g for o in r.oracle_by_zone.values()))])
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    print_table(console, f"policy {summary['policy']} across {', '.join(summary['zones'])} (home "
                         f"{summary['home']})", columns, rows, right=columns[4:])
    by_zone = ", ".join(f"{zone} {grams(g)}" for zone, g in summary["emissions_by_zone_g"].items())
    console.print(
        f"saving vs stay-home: {100 * (summary['saving_vs_stay_home'] or 0):.1f} % (greenest-at-start "
        f"{100 * (summary['greenest_at_start_saving_vs_stay_home'] or 0):.1f} %, best-zone oracle "
        f"{100 * (summary['best_zone_oracle_saving_vs_stay_home'] or 0):.1f} %); migrations: "
        f"{summary['migrations']} ({summary['migration_overhead_min']:g} min each); emissions by zone: {by_zone}; "
        f"deadlines missed: {summary['deadlines_missed']}/{summary['runs']}", markup=False, highlight=False)
