"""``greentrain doctor``: what this machine can measure and control, and why not where it cannot.

Exits 0 even when nothing is measurable (it says so: energy is then estimated).
``GREENTRAIN_RAPL_ROOT`` points at another powercap tree (e.g. a host's
``/sys/class/powercap`` mounted into a container).
"""

from __future__ import annotations

import json
import os
from typing import Any

import click

__all__ = ["doctor", "rapl_root_from_env"]


def rapl_root_from_env() -> str:
    """The powercap directory to scan: ``$GREENTRAIN_RAPL_ROOT`` or ``/sys/class/powercap``."""
    return os.environ.get("GREENTRAIN_RAPL_ROOT") or "/sys/class/powercap"


def _yes_no(value: Any) -> str:
    return {True: "yes", False: "no", None: "unknown"}.get(value, str(value))


def _render(report: dict[str, Any]) -> None:
    from rich.console import Console

    from greentrain.cli.tables import print_table

    console = Console()
    if report["gpus"]:
        rows = []
        for g in report["gpus"]:
            if "error" in g:
                rows.append([str(g["index"]), g["name"], g["uuid"], "", f"error: {g['error']}", "", ""])
                continue
            span = g["power_limit_range_w"]
            limit = f"{_yes_no(g['power_limit_control'])} ({_yes_no(g['power_limit_permitted'])})"
            limit += f" {span[0]:g}-{span[1]:g} W" if span else ""
            clocks = f"{_yes_no(g['clock_control'])} ({_yes_no(g['clock_control_permitted'])})"
            energy = "counter (measured)" if g["energy_counter"] else f"{g['energy_source'] or 'none'}"
            rows.append([str(g["index"]), g["name"], g["uuid"], g["architecture"], energy, limit, clocks])
        print_table(console, "GPUs", ("GPU", "name", "UUID", "arch", "energy", "power limit (permitted)",
                                      "clocks (permitted)"), rows)
    else:
        console.print("GPUs: none")
    if report["rapl"]:
        rows = [[d["name"], d["path"], "yes" if d["readable"] else d["status"]] for d in report["rapl"]]
        print_table(console, "RAPL (CPU energy counters)", ("domain", "path", "readable"), rows)
    else:
        console.print("RAPL: none")
    est = report["cpu_estimate"]
    used = "used for CPU energy" if report["estimate_used_for_cpu"] else "not used, RAPL is readable"
    console.print(
        f"CPU estimate ({used}): {est['cpu_model']!r}, TDP {est['tdp_w']:g} W from {est['tdp_source']}", markup=False
    )
    for note in report["notes"]:
        console.print(f"note: {note}", markup=False)
    versions = ", ".join(f"{k} {v}" for k, v in report["versions"].items() if v)
    console.print(f"versions: {versions}", markup=False)
    console.print(report["summary"], style="bold", markup=False)


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def doctor(as_json: bool) -> None:
    """Show what this machine can measure and control: GPUs, RAPL, the CPU estimate, versions."""
    from greentrain.device import discover
    from greentrain.device.inventory import machine_report
    from greentrain.errors import NotSupportedError

    rapl_root = rapl_root_from_env()
    try:
        devices = discover(rapl_root=rapl_root, estimate_cpu=False)
    except NotSupportedError as e:  # a MIG slice in CUDA_VISIBLE_DEVICES: diagnose it, show the whole node
        devices = discover(None, rapl_root=rapl_root, estimate_cpu=False)
        devices.notes.insert(0, str(e))
    with devices:
        report = machine_report(devices, rapl_root)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _render(report)
