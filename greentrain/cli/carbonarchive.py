"""``greentrain carbon record | archive | skill``: keep every forecast as issued, and measure what it was worth.

``record`` fetches a provider's forecast (and its latest actuals) on a
schedule (APScheduler) into an archive file; ``archive export/import`` move
archives to and from the long CSV format, and ``archive import
--watttime-historical`` pulls WattTime's past forecasts; ``skill`` prints each
source's error by hours ahead against the actuals that arrived later.
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from greentrain.errors import ConfigError
from greentrain.userfile import JSONObject, JSONValue

if TYPE_CHECKING:
    from greentrain.clock import Clock
    from greentrain.signals.archive.store import ForecastArchive
    from greentrain.signals.base import CarbonIntensityProvider
    from greentrain.signals.archive.recording import ArchiveRecorder
    from greentrain.signals.archive.skillreport import ZoneSkill

__all__ = ["archive", "parse_every", "record", "skill"]

_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_every(text: str, option: str = "--every") -> float:
    """'90s', '15m', '1h', '1d' as seconds; ConfigError naming ``option`` otherwise."""
    match = _EVERY.match(text)
    if not match:
        raise ConfigError(f"{option}: {text!r} is not a period such as 30s, 15m, 1h or 1d")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if not 1 <= seconds <= 7 * 86400:
        raise ConfigError(f"{option}: {text!r} must be between 1 s and 7 days")
    return seconds


def _archive_path(path: Path | None) -> Path:
    from greentrain.signals.archive.recording import default_archive_path

    if path is not None:
        return path
    default = default_archive_path()
    if default is None:
        raise ConfigError("--archive: recording is off ($GREENTRAIN_FORECAST_ARCHIVE=off); name a file")
    return default


def _open(path: Path | None, *, create: bool) -> ForecastArchive:
    from greentrain.signals.archive.store import ForecastArchive

    return ForecastArchive(_archive_path(path), create=create)


_ARCHIVE_OPTION = click.option("--archive", "archive_path", type=click.Path(dir_okay=False, path_type=Path),
                               default=None, help="Archive file (default: the signal cache's, "
                                                  "~/.cache/greentrain/signals/forecasts.sqlite).")


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%SZ")


@click.command()
@click.option("--zone", required=True, help="Zone or WattTime region (as for `carbon forecast`).")
@click.option("--provider", "provider_spec", required=True, help="electricitymaps | watttime | ukgrid | a plugin.")
@click.option("--every", "every_text", default="1h", show_default=True, help="Period between fetches: 30m, 1h, ...")
@_ARCHIVE_OPTION
@click.option("--hours", type=click.IntRange(1, 168), default=72, show_default=True, help="Forecast horizon asked.")
@click.option("--count", type=click.IntRange(1), default=None, help="Stop after this many fetches (default: never).")
@click.option("--max-mb", type=click.IntRange(1), default=None,
              help="Prune the oldest forecasts past this size (default: 128 MiB).")
@click.option("--api-base", default=None, help="Base URL of the HTTP provider (proxies, tests).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.1, 120.0), default=10.0, show_default=True,
              help="Total deadline of one provider call in seconds.")
def record(zone: str, provider_spec: str, every_text: str, archive_path: Path | None, hours: int,
           count: int | None, max_mb: int | None, api_base: str | None, timeout_s: float) -> None:
    """Record PROVIDER's forecasts for ZONE into an archive, every --every, until stopped."""
    from apscheduler.schedulers.blocking import BlockingScheduler
    from apscheduler.triggers.interval import IntervalTrigger

    from greentrain.clock import SystemClock
    from greentrain.signals import make_provider
    from greentrain.signals.archive.recording import DEFAULT_MAX_BYTES, ArchiveRecorder
    from greentrain.signals.providers.zones import require_zone

    every_s = parse_every(every_text)
    require_zone(zone, provider_spec, "--zone")
    clock = SystemClock()
    if provider_spec.strip().lower() in ("electricitymaps", "watttime", "ukgrid"):
        provider = make_provider(provider_spec, clock=clock, api_base=api_base, timeout_s=timeout_s)
    else:
        provider = make_provider(provider_spec, clock=clock, api_base=api_base)
    if not provider.issues_forecasts:
        raise ConfigError(f"--provider {provider_spec}: it has no forecast of its own to record")
    path = _archive_path(archive_path)
    recorder = ArchiveRecorder(path, max_bytes=DEFAULT_MAX_BYTES if max_mb is None else max_mb << 20,
                               on_problem=lambda message: click.echo(f"greentrain: {message}", err=True))
    fetches = [0]
    done = threading.Event()
    scheduler = BlockingScheduler(timezone="UTC")

    def fetch() -> None:
        _record_once(provider, zone, hours, every_s, recorder, clock)
        fetches[0] += 1
        if count is not None and fetches[0] >= count and not done.is_set():
            done.set()
            scheduler.shutdown(wait=False)

    scheduler.add_job(fetch, IntervalTrigger(seconds=every_s), next_run_time=clock.now(), max_instances=1,
                      coalesce=True, misfire_grace_time=int(max(1, every_s // 2)))
    click.echo(f"greentrain: recording {provider.name} forecasts for {zone} every {every_text} into {path}"
               + (f" ({count} fetches)" if count else " (Ctrl-C stops)"), err=True)
    try:
        scheduler.start()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        recorder.close()
        provider.close()


def _record_once(provider: CarbonIntensityProvider, zone: str, hours: int, every_s: float,
                 recorder: ArchiveRecorder, clock: Clock) -> None:
    """One fetch: the forecast under its fetch time, and the actuals of the last period. Never raises."""
    from greentrain.errors import SignalError

    issued_at = clock.now()
    try:
        points = provider.forecast(zone, float(hours))
    except SignalError as e:
        click.echo(f"greentrain: {_stamp(issued_at)}: {provider.name} forecast failed ({e}); trying again "
                   f"in {every_s:g} s", err=True)
        return
    rows = recorder.record_forecast(points, issued_at=issued_at, provider=provider.name, zone=zone)
    actual_rows = 0
    try:
        since = issued_at - timedelta(seconds=max(every_s, 3600.0) + 3600.0)
        actual_rows = recorder.record_actuals(provider.history(zone, since, issued_at))
    except SignalError as e:
        click.echo(f"greentrain: {_stamp(issued_at)}: {provider.name} history failed ({e})", err=True)
    click.echo(f"{_stamp(issued_at)}: {provider.name} {zone}: {rows} forecast hours, {actual_rows} actual hours")


@click.group()
def archive() -> None:
    """Export, import and list a forecast archive."""


@archive.command("list")
@_ARCHIVE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_series(archive_path: Path | None, as_json: bool) -> None:
    """The series (provider, zone) in an archive, with their rows and issue times."""
    from greentrain.signals.archive.longcsv import iso_z

    with _open(archive_path, create=False) as store:
        series = store.series()
    rows = [{"provider": s.provider, "zone": s.zone, "unit": s.unit, "forecast_rows": s.forecast_rows,
             "actual_rows": s.actual_rows, "first_issued": None if s.first_issued_s is None else iso_z(s.first_issued_s),
             "last_issued": None if s.last_issued_s is None else iso_z(s.last_issued_s)} for s in series]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        click.echo(f"{row['provider']} {row['zone']} ({row['unit']}): {row['forecast_rows']} forecast rows issued "
                   f"{row['first_issued']} to {row['last_issued']}, {row['actual_rows']} actual hours")


def _one_series(store: ForecastArchive, provider: str | None, zone: str | None) -> tuple[str, str]:
    with_forecasts = [s for s in store.series() if s.forecast_rows]
    matches = [s for s in with_forecasts if (provider is None or s.provider == provider)
               and (zone is None or s.zone == zone)]
    if len(matches) == 1:
        return matches[0].provider, matches[0].zone
    have = ", ".join(f"{s.provider}/{s.zone}" for s in with_forecasts) or "no forecasts"
    if not matches:
        raise ConfigError(f"--provider/--zone: no such series in {store.path} (it has {have})")
    raise ConfigError(f"--provider/--zone: {store.path} has several series ({have}); name one")


@archive.command("export")
@_ARCHIVE_OPTION
@click.option("--csv", "as_csv", is_flag=True, required=True, help="The long CSV format (the only one).")
@click.option("--provider", default=None, help="Series to export (needed when the archive has several).")
@click.option("--zone", default=None, help="Series to export (needed when the archive has several).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write (default: standard output).")
def export(archive_path: Path | None, as_csv: bool, provider: str | None, zone: str | None,
           output: Path | None) -> None:
    """Write one series as issued_at,target_time,intensity_g_per_kwh rows."""
    from greentrain.signals.archive.longcsv import write_forecast_csv

    with _open(archive_path, create=False) as store:
        provider, zone = _one_series(store, provider, zone)
        issued, target, value = store.forecast_rows(provider, zone)
    rows = zip(issued.tolist(), target.tolist(), value.tolist())
    if output is None:
        write_forecast_csv(rows, sys.stdout)
        return
    with open(output, "w", encoding="utf-8", newline="") as handle:
        written = write_forecast_csv(rows, handle)
    click.echo(f"greentrain: wrote {written} rows of {provider}/{zone} to {output}", err=True)


@archive.command("import")
@_ARCHIVE_OPTION
@click.argument("csv_path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--provider", default=None, help="Series name for a CSV's forecasts (e.g. the source's name).")
@click.option("--zone", default=None, help="Zone of a CSV's forecasts; the WattTime region with "
                                           "--watttime-historical.")
@click.option("--watttime-historical", is_flag=True, help="Pull WattTime's past forecasts (needs its credentials).")
@click.option("--start", "start_text", default=None, help="--watttime-historical: first issue time, ISO-8601.")
@click.option("--end", "end_text", default=None, help="--watttime-historical: end of the issue times, ISO-8601.")
@click.option("--every", "every_text", default="1h", show_default=True,
              help="--watttime-historical: keep one forecast per period.")
@click.option("--api-base", default=None, help="WattTime base URL (proxies, tests).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.1, 120.0), default=30.0, show_default=True,
              help="Deadline of one WattTime request in seconds.")
def import_(archive_path: Path | None, csv_path: Path | None, provider: str | None, zone: str | None,
            watttime_historical: bool, start_text: str | None, end_text: str | None, every_text: str,
            api_base: str | None, timeout_s: float) -> None:
    """Add a long-format CSV (CSV_PATH, with --provider and --zone), or WattTime's past forecasts."""
    from greentrain.signals.archive.importers import import_csv

    if watttime_historical:
        if csv_path is not None:
            raise ConfigError("--watttime-historical: takes no CSV_PATH (it reads WattTime's API)")
        _import_watttime(archive_path, zone, start_text, end_text, every_text, api_base, timeout_s)
        return
    if csv_path is None:
        raise ConfigError("carbon archive import: give CSV_PATH (with --provider and --zone) or --watttime-historical")
    if provider is None or zone is None:
        raise ConfigError("--provider and --zone: name the series the CSV's forecasts belong to")
    with _open(archive_path, create=True) as store:
        result = import_csv(store, csv_path, provider=provider, zone=zone)
    click.echo(f"greentrain: {csv_path}: {result.issues} forecasts, {result.rows_added} new rows into "
               f"{store.path} as {provider}/{zone}" + (f"; {result.skipped} repeated rows skipped"
                                                      if result.skipped else ""), err=True)


def _import_watttime(archive_path: Path | None, zone: str | None, start_text: str | None, end_text: str | None,
                     every_text: str, api_base: str | None, timeout_s: float) -> None:
    from greentrain.cli.simulate import parse_time
    from greentrain.signals import make_provider
    from greentrain.signals.archive.importers import ForecastHistorySource, import_watttime_history

    if zone is None or start_text is None or end_text is None:
        raise ConfigError("--watttime-historical: needs --zone REGION, --start and --end")
    start, end = parse_time(start_text, "--start"), parse_time(end_text, "--end")
    provider = make_provider("watttime", api_base=api_base, timeout_s=timeout_s)
    assert isinstance(provider, ForecastHistorySource)  # the WattTime provider keeps its issued forecasts
    if not provider.configured():
        raise ConfigError("--watttime-historical: no credentials; set $WATTTIME_USER and $WATTTIME_PASSWORD "
                          "(or $WATTTIME_PASSWORD_FILE)")
    try:
        with _open(archive_path, create=True) as store:
            result = import_watttime_history(provider, store, zone, start, end, every_s=parse_every(every_text))
    finally:
        provider.close()
    click.echo(f"greentrain: watttime {zone}: {result.issues} past forecasts, {result.rows_added} new rows into "
               f"{store.path}" + (f"; {result.skipped} thinned out by --every" if result.skipped else ""), err=True)


@click.command()
@_ARCHIVE_OPTION
@click.option("--zone", required=True, help="Zone whose sources to score.")
@click.option("--provider", "providers", multiple=True, help="Only these sources (repeatable).")
@click.option("--actuals", "actuals_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Electricity Maps CSV export to score against (default: the archive's own actuals).")
@click.option("--with-own", is_flag=True, help="Also score greentrain's forecaster, run at every hour on the actuals.")
@click.option("--hours", type=click.IntRange(1, 168), default=72, show_default=True, help="Hours ahead to score.")
@click.option("--max-age-hours", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="An issued forecast older than this counts as none (default: 6, or twice the source's usual "
                   "time between issues when longer).")
@click.option("--json", "as_json", is_flag=True, help="Every hour ahead, machine-readable.")
def skill(archive_path: Path | None, zone: str, providers: tuple[str, ...], actuals_path: Path | None,
          with_own: bool, hours: int, max_age_hours: float | None, as_json: bool) -> None:
    """Each source's error by hours ahead, against the actuals that arrived later."""
    from greentrain.signals.archive.skillreport import zone_skill
    from greentrain.signals.trace import load_trace

    actuals = load_trace(actuals_path) if actuals_path is not None else None
    with _open(archive_path, create=False) as store:
        report = zone_skill(store, zone, providers=providers, actuals=actuals, with_own=with_own, horizon_h=hours,
                            max_age_h=max_age_hours)
    if as_json:
        click.echo(json.dumps(_skill_json(report), indent=2))
        return
    _print_skill(report, hours)


def _number(value: float, digits: int = 1) -> float | None:
    return None if not math.isfinite(float(value)) else round(float(value), digits)


def _skill_json(report: ZoneSkill) -> JSONObject:
    sources: JSONObject = {}
    for name, e in report.errors.items():
        sources[name] = [{"hours_ahead": h + 1, "count": int(e.count[h]), "mae_g_per_kwh": _number(e.mae_g_per_kwh[h]),
                          "rmse_g_per_kwh": _number(e.rmse_g_per_kwh[h]), "bias_g_per_kwh": _number(e.bias_g_per_kwh[h]),
                          "mape": _number(e.mape[h], 4)} for h in range(e.count.size)]
    return {"zone": report.zone, "origins": report.origins, "sources": sources,
            "skipped_rows": dict[str, JSONValue](report.skipped)}


def _print_skill(report: ZoneSkill, hours: int) -> None:
    from rich.console import Console

    from greentrain.cli.tables import print_table

    shown = [h for h in (1, 2, 3, 6, 12, 18, 24, 36, 48, 60, 72, 96, 120, 144, 168) if h <= hours]
    columns = ["hours ahead"] + [f"{name} MAE g/kWh (MAPE)" for name in report.errors]
    rows = []
    for h in shown:
        cells = [str(h)]
        for e in report.errors.values():
            mae, mape = e.mae_g_per_kwh[h - 1], e.mape[h - 1]
            cells.append("-" if not math.isfinite(mae) else
                         f"{mae:.1f} ({100 * mape:.1f} %)" if math.isfinite(mape) else f"{mae:.1f}")
        rows.append(cells)
    console = Console()
    print_table(console, f"Forecast error by hours ahead: {report.zone} ({report.origins} hourly origins)",
                columns, rows, right=columns[1:])
    counts = ", ".join(f"{name} {int(e.count[shown[0] - 1])}" for name, e in report.errors.items())
    console.print(f"pairs scored at {shown[0]} h ahead: {counts}", markup=False)
    for name, rows_skipped in report.skipped.items():
        console.print(f"skipped: {rows_skipped} rows of {name} (another zone or unit)", markup=False)
