"""``greentrain whatif``: what greentrain would have done with runs CodeCarbon recorded.

Reads CodeCarbon ``emissions.csv`` files (any version's columns), replays
each run through a policy on a carbon trace or a provider's history with the
simulator behind ``greentrain simulate``, and prints per run when it would
have run or paused, at what power limit, the net saving and the delay to the
finish; ``--json`` for one object, ``--report DIR`` for an HTML page.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click

from greentrain.cli.simulate import IDLE_TO_RUNNING
from greentrain.codecarbon import read_emissions
from greentrain.device.profiles import load_gpu_profile
from greentrain.errors import ConfigError
from greentrain.policies import Policy, load_policy
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.providers.zones import require_zone
from greentrain.sim.sources import IntensitySource, ProviderSource, TraceSource
from greentrain.sim.whatif import WhatIfFile, WhatIfSettings, what_if
from greentrain.sim.whatif_report import schedule_text, write_report
from greentrain.sim.whatif_summary import run_json, skipped_json, totals
from greentrain.units import format_duration_s, format_mass_g
from greentrain.userfile import JSONObject

__all__ = ["whatif"]

_OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})$")


def _timezone(text: str) -> tzinfo:
    """'UTC', an IANA name ('Europe/Paris') or an offset ('+02:00')."""
    if text.upper() in ("UTC", "Z"):
        return UTC
    match = _OFFSET.match(text.strip())
    if match:
        sign = -1 if match[1] == "-" else 1
        return timezone(sign * timedelta(hours=int(match[2]), minutes=int(match[3])))
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"--timestamps-tz: {text!r} is not UTC, an offset such as +02:00 or a time zone "
                          "such as Europe/Paris") from None


def _source(trace: Path | None, provider: str | None, column: str) -> IntensitySource:
    if (trace is None) == (provider is None):
        raise ConfigError("give exactly one of --trace FILE or --provider SPEC")
    if provider is not None and provider.strip().lower().startswith("csv:"):
        trace = Path(provider.split(":", 1)[1])
    if trace is not None:
        return TraceSource(trace, column)
    from greentrain.signals.providers.registry import make_provider

    return ProviderSource(make_provider(str(provider)), str(provider))


def _warn(line: str) -> None:
    click.echo(f"greentrain: warning: {line}", err=True)


@click.command("whatif")
@click.argument("emissions", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Electricity Maps hourly CSV export (its zone prices the runs; another year: same date and hour).")
@click.option("--provider", help="Carbon provider whose history prices the runs: static, electricitymaps, "
                                 "watttime, ukgrid or csv:PATH.")
@click.option("--column", type=click.Choice(["direct", "lca"]), default="direct", show_default=True,
              help="Trace column.")
@click.option("--zone", help="Price every run in this zone (default: each row's country and region).")
@click.option("--policy", "policy_spec", default="carbon-aware", show_default=True, help="Preset name or TOML file.")
@click.option("--slack", type=float, default=2.0, show_default=True,
              help="Deadline = each run's duration x SLACK after its start.")
@click.option("--deadline-hours", type=float, default=None, help="A fixed deadline, hours after each run's start "
                                                                 "(instead of --slack).")
@click.option("--resume-overhead-min", type=float, default=5.0, show_default=True,
              help="Minutes at full power without progress per resume after a pause.")
@click.option("--idle-power-kw", type=float, default=None,
              help="Draw while held paused; default 0.12 x the run's mean draw (H100 measured).")
@click.option("--gpu-profile", default=None, help="v100, a40, rtx6000, a Zeus summary CSV, or none; default: the "
                                                  "shipped profile matching each row's gpu_model.")
@click.option("--workload", default=None, help="The profile's DATASET/NETWORK curve (default: the median over its "
                                               "workloads).")
@click.option("--timestamps-tz", "tz_text", default="UTC", show_default=True,
              help="Time zone of the files' timestamps (CodeCarbon writes the tracking machine's local time).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object {files, summary}.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write an HTML report (index.html and figures) into this folder.")
def whatif(emissions: tuple[Path, ...], as_json: bool, report_dir: Path | None, **flags: Any) -> None:
    """Say what greentrain would have done with runs in CodeCarbon emissions.csv files."""
    source = _source(flags["trace_path"], flags["provider"], flags["column"])
    settings = _settings(flags, source)
    policy = load_policy(flags["policy_spec"])
    files = _replay_files(emissions, source, policy, settings, _timezone(flags["tz_text"]))
    if not any(f.runs for f in files):
        raise ConfigError("\n".join(f"{f.path}:{s.row}: {s.reason}" for f in files for s in f.skipped[:10]))
    name = policy.name
    hours = flags["deadline_hours"]
    deadline = f"{hours:g} h after each start" if hours else f"the run's duration x {flags['slack']:g}"
    summary = totals([r for f in files for r in f.runs], name)
    for f in files:
        for s in f.skipped:
            _warn(f"{f.path}:{s.row}: skipped: {s.reason}")
        for note in f.notes:
            _warn(f"{f.path}: {note}")
    if as_json:
        out: JSONObject = {"files": [{"path": f.path, "runs": [run_json(r) for r in f.runs],
                                      "skipped": skipped_json(f.skipped), "notes": list(f.notes)} for f in files],
                           "deadline": deadline, "summary": summary}
        click.echo(json.dumps(out))
    else:
        _print(files, summary, deadline, source.name)
    if report_dir is not None:
        index = write_report(files, summary, deadline, report_dir)
        click.echo(f"greentrain: report written to {index}", err=True)


def _settings(flags: dict[str, Any], source: IntensitySource) -> WhatIfSettings:
    """How each run becomes a job, from the flags (each bad value one line naming its flag)."""
    zone, idle_kw, overhead_min = flags["zone"], flags["idle_power_kw"], flags["resume_overhead_min"]
    if zone is not None and source.zone is not None and not source.accepts(zone):
        raise ConfigError(f"--zone: {zone!r} is not the zone of the trace {source.name} ({source.zone})")
    if zone is not None:
        require_zone(zone, flags["provider"], "--zone")
    profile = flags["gpu_profile"]
    if profile is not None and profile.lower() != "none":
        try:
            load_gpu_profile(profile)
        except ConfigError as e:
            raise ConfigError(f"--gpu-profile: {e}") from None
    if idle_kw is not None and not 0 <= idle_kw < float("inf"):
        raise ConfigError(f"--idle-power-kw: must be a number >= 0, got {idle_kw:g}")
    if not 0 <= overhead_min < 60:
        raise ConfigError(f"--resume-overhead-min: must be in [0, 60), got {overhead_min:g}")
    return WhatIfSettings(slack=flags["slack"], deadline_h=flags["deadline_hours"], resume_overhead_min=overhead_min,
                          idle_ratio=IDLE_TO_RUNNING, idle_power_kw=idle_kw, zone=zone,
                          gpu_profile=flags["gpu_profile"], workload=flags["workload"])


def _replay_files(paths: tuple[Path, ...], source: IntensitySource, policy: Policy, settings: WhatIfSettings,
                  timestamps_tz: tzinfo) -> list[WhatIfFile]:
    files = []
    for path in paths:
        found = read_emissions(path, timestamps_tz=timestamps_tz)
        runs, unpriced = what_if(found.runs, source, policy, Forecaster(), settings)
        notes = list(found.notes)
        if found.unknown_columns:
            notes.append(f"columns not read (no CodeCarbon version known to greentrain writes them): "
                         f"{', '.join(found.unknown_columns)}")
        files.append(WhatIfFile(str(path), runs, sorted(found.skipped + unpriced, key=lambda s: s.row), notes))
    return files


def _print(files: list[WhatIfFile], summary: JSONObject, deadline: str, signal: str) -> None:
    from rich.console import Console

    from greentrain.cli.tables import print_table

    several = len(files) > 1
    columns = ("row", "started UTC", "ran", "zone", "greentrain would run", "power limit", "run now", "greentrain",
               "saving", "delay")
    rows = []
    for f in files:
        for item in f.runs:
            limits = ", ".join(f"{w:g} W/GPU" for w in item.power_limits_w) or ("max" if item.profile.startswith("profile ")
                                                                              else "no profile")
            rows.append([f"{Path(f.path).name}:{item.run.row}" if several else str(item.run.row),
                         f"{item.run.started_at:%Y-%m-%d %H:%M}", format_duration_s(item.run.duration_s), item.zone,
                         schedule_text(item), limits, format_mass_g(item.result.run_now.emissions_g, suffix=""),
                         format_mass_g(item.result.policy.emissions_g, suffix=""),
                         format_mass_g(item.saving_g, suffix=""),
                         "-" if item.delay_s is None else format_duration_s(item.delay_s)])
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)
    print_table(console, f"policy {summary['policy']} on {signal}, deadline {deadline} (gCO2eq)", columns, rows,
                right=columns[6:])
    saving = summary.get("saving_fraction")
    mean = summary.get("mean_delay_s")
    console.print(
        f"total: run now {format_mass_g(summary['run_now_emissions_g'])}, greentrain "  # type: ignore[arg-type]
        f"{format_mass_g(summary['emissions_g'])}, saving {format_mass_g(summary['saving_g'])}"  # type: ignore[arg-type]
        f"{'' if saving is None else f' ({100 * saving:.1f} %)'} net of "  # type: ignore[operator]
        f"{summary['waiting_energy_kwh']} kWh drawn while held; deadlines missed "
        f"{summary['deadlines_missed']}/{summary['runs']}; mean delay "
        f"{'-' if mean is None else format_duration_s(mean)}; precision: no profile",  # type: ignore[arg-type]
        markup=False, highlight=False, soft_wrap=True)
    by_signal: dict[str, list[str]] = {}
    for f in files:
        for item in f.runs:
            label = f"{Path(f.path).name}:{item.run.row}" if several else f"row {item.run.row}"
            by_signal.setdefault(item.signal, []).append(label)
            for note in item.notes:
                console.print(f"{label}: {note}", markup=False, highlight=False, soft_wrap=True)
    for label, labels in by_signal.items():
        if label != Path(signal).name:
            console.print(f"carbon signal: {label} ({', '.join(labels)})", markup=False, highlight=False,
                          soft_wrap=True)
