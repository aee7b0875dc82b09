"""``greentrain doctor``: what this machine can measure and control, and why not where it cannot.

Exits 0 even when nothing is measurable (it says so: energy is then estimated).
Read-only: "permitted" is judged from the effective uid and capabilities or a
reachable ``greentrain daemon`` and shown as unverified; ``--probe-write``
verifies it with a same-value power-limit write, which advisory mode refuses.
``GREENTRAIN_RAPL_ROOT`` points at another powercap tree (e.g. a host's
``/sys/class/powercap`` mounted into a container).
"""

from __future__ import annotations

import json
import os

import click

__all__ = ["doctor", "rapl_root_from_env"]


def rapl_root_from_env() -> str:
    """The powercap directory to scan: ``$GREENTRAIN_RAPL_ROOT`` or ``/sys/class/powercap``."""
    return os.environ.get("GREENTRAIN_RAPL_ROOT") or "/sys/class/powercap"


def _yes_no(value: object) -> str:
    words: dict[object, str] = {True: "yes", False: "no", None: "unknown"}
    return words.get(value, str(value))


def _render(report: dict[str, object]) -> None:
    from rich.console import Console

    from greentrain.cli.tables import print_table

    console = Console()
    notes: list[str] = []
    # machine_report's shape (greentrain.device.inventory): lists and objects where read below
    gpus, rapl, est = report["gpus"], report["rapl"], report["cpu_estimate"]
    given_notes, versions = report["notes"], report["versions"]
    assert isinstance(gpus, list) and isinstance(rapl, list) and isinstance(est, dict)
    assert isinstance(given_notes, list) and isinstance(versions, dict)
    if gpus:
        rows = []
        for g in gpus:
            if "error" in g:
                rows.append([str(g["index"]), g["name"], g["uuid"], "", f"error: {g['error']}", "", ""])
                continue
            span = g["power_limit_range_w"]
            limit = f"{_yes_no(g['power_limit_control'])} ({_permitted(g)})"
            limit += f" {span[0]:g}-{span[1]:g} W" if span else ""
            clocks = f"{_yes_no(g['clock_control'])} ({_yes_no(g['clock_control_permitted'])})"
            if g["power_limit_control"]:
                verify = "" if g["permitted_verified"] else " (--probe-write verifies with a same-value write)"
                notes.append(f"GPU {g['index']}: permitted {_permitted(g)}: {g['permitted_basis']}{verify}")
            energy = "counter (measured)" if g["energy_counter"] else f"{g['energy_source'] or 'none'}"
            rows.append([str(g["index"]), g["name"], g["uuid"], g["architecture"], energy, limit, clocks])
        print_table(console, "GPUs", ("GPU", "name", "UUID", "arch", "energy", "power limit (permitted)",
                                      "clocks (permitted)"), rows)
    else:
        console.print("GPUs: none")
    if rapl:
        rows = [[d["name"], d["path"], "yes" if d["readable"] else d["status"]] for d in rapl]
        print_table(console, "RAPL (CPU energy counters)", ("domain", "path", "readable"), rows)
    else:
        console.print("RAPL: none")
    used = "used for CPU energy" if report["estimate_used_for_cpu"] else "not used, RAPL is readable"
    console.print(
        f"CPU estimate ({used}): {est['cpu_model']!r}, TDP {est['tdp_w']:g} W from {est['tdp_source']}", markup=False
    )
    for note in [*given_notes, *notes]:
        console.print(f"note: {note}", markup=False)
    named = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
    console.print(f"versions: {named}", markup=False)
    console.print(f"hardware writes: {report['hardware_writes']}", markup=False)
    console.print(report["summary"], style="bold", markup=False)


def _permitted(gpu: dict[str, object]) -> str:
    answer = _yes_no(gpu["power_limit_permitted"])
    return answer if gpu["permitted_verified"] or gpu["power_limit_permitted"] is None else f"{answer}, unverified"


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--probe-write", is_flag=True,
              help="Verify the privilege by re-applying each GPU's current power limit (a hardware write; "
                   "without it doctor only reads and marks 'permitted' unverified).")
@click.option("--advise-only", is_flag=True, help="Advisory mode (as GREENTRAIN_ADVISE_ONLY=1): refuse any write.")
def doctor(as_json: bool, probe_write: bool, advise_only: bool) -> None:
    """Show what this machine can measure and control: GPUs, RAPL, the CPU estimate, versions (read-only)."""
    from greentrain.actuators.advisory import refuse_write_if_advisory
    from greentrain.device import discover
    from greentrain.device.inventory import machine_report
    from greentrain.errors import NotSupportedError

    if probe_write:
        refuse_write_if_advisory("--probe-write", advise_only)

    rapl_root = rapl_root_from_env()
    try:
        devices = discover(rapl_root=rapl_root, estimate_cpu=False)
    except NotSupportedError as e:  # a MIG slice in CUDA_VISIBLE_DEVICES: diagnose it, show the whole node
        devices = discover(None, rapl_root=rapl_root, estimate_cpu=False)
        devices.notes.insert(0, str(e))
    with devices:
        report = machine_report(devices, rapl_root, probe_write=probe_write)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _render(report)
