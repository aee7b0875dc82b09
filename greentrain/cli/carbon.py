"""``greentrain carbon``: read grid carbon intensity now, as a forecast, or as history.

With ``--provider`` exactly that provider answers and any failure is reported
(one line, exit 2). Without it the default fallback chain answers —
Electricity Maps when a token is configured, the GB Carbon Intensity API for
GB, then CodeCarbon's static average — and the output says which provider
was used and whether the value is stale. API keys are read from the
environment or a file only, never from an option (``ps`` would show them).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

import click

from greentrain.clock import Clock, FrozenClock, SystemClock
from greentrain.errors import ConfigError, SignalError
from greentrain.signals.base import IntensityPoint
from greentrain.userfile import JSONObject

if TYPE_CHECKING:
    from greentrain.signals.base import CarbonIntensityProvider, ProviderStatus
    from greentrain.signals.chain import SignalChain

__all__ = ["carbon"]

F = TypeVar("F", bound=Callable[..., object])

_PROVIDER_HELP = "electricitymaps | watttime | ukgrid | static | csv:PATH (default: the fallback chain)."


def _point_dict(point: IntensityPoint) -> JSONObject:
    from greentrain.signals.cache import point_to_dict

    return point_to_dict(point)


_HTTP_PROVIDERS = ("electricitymaps", "watttime", "ukgrid")


def _build(
    zone: str, provider: str | None, api_base: str | None, column: str, timeout_s: float = 10.0
) -> tuple[CarbonIntensityProvider | SignalChain, Clock]:
    """A provider (explicit spec) or the default chain for ``zone``, and the clock it runs on.

    A CSV trace runs on a clock frozen at the trace's "now" (this month/day/hour
    in the trace's year), so every time printed is trace time, consistently.
    """
    from greentrain.signals import SignalChain, make_provider
    from greentrain.signals.providers.zones import require_zone

    require_zone(zone, provider, "--zone")
    clock: Clock = SystemClock()
    if provider and provider.strip().lower().startswith("csv:"):
        from greentrain.signals.providers.csvtrace import CSVTraceProvider

        probe = make_provider(provider, clock=clock, column=column)
        assert isinstance(probe, CSVTraceProvider)  # what a 'csv:' spec makes
        trace_now = probe.trace_now()
        clock = FrozenClock(trace_now)
        today = SystemClock().now()
        if trace_now.year != today.year:  # say so: every time below is in the trace's year, not today's
            from greentrain.units import format_time

            from pathlib import Path

            click.echo(f"greentrain: replaying trace {Path(provider.strip()[4:]).name}: now is read as "
                       f"{format_time(trace_now)} (today's date and time in the trace's year)", err=True)
        return make_provider(provider, clock=clock, column=column), clock
    if provider:
        if provider.strip().lower() in _HTTP_PROVIDERS:
            return make_provider(provider, clock=clock, api_base=api_base, timeout_s=timeout_s), clock
        return make_provider(provider, clock=clock, api_base=api_base), clock
    if api_base:
        raise click.BadParameter("--api-base needs --provider (which provider's base URL?)", param_hint="--api-base")
    chain = [make_provider("electricitymaps", clock=clock, timeout_s=timeout_s)]
    chain = [p for p in chain if p.configured()]
    if zone.upper() == "GB" or zone.lower().startswith(("postcode:", "region:")):
        chain.append(make_provider("ukgrid", clock=clock, timeout_s=timeout_s))
    chain.append(make_provider("static", clock=clock))
    return SignalChain(chain, zone=zone, clock=clock), clock


def _why_no_forecast(chain: SignalChain) -> str:
    """What each provider of ``chain`` lacked: an error it gave, or no forecast and no history to make one from."""
    names = [p.name for p in chain.providers]
    error = chain.status().last_error
    said = f"{error}; " if error else ""
    offline = [n for n in names if n == "static"]
    tail = (f"{' and '.join(offline)} has annual averages only, no forecast; " if offline else
            f"{', '.join(names)} returned neither a forecast nor the history one is made from; ")
    return (said + tail + "give a provider with a forecast: --provider electricitymaps ($ELECTRICITYMAPS_TOKEN), "
            "ukgrid (GB, no key), watttime, or csv:PATH (a recorded trace)")


def _emit(points: Sequence[IntensityPoint], as_json: bool, title: str, status: ProviderStatus | None = None) -> None:
    if as_json:
        payload: JSONObject = {"points": [_point_dict(p) for p in points]}
        if status is not None:
            payload["status"] = {
                "provider": status.provider,
                "zone": status.zone,
                "age_s": None if math.isinf(status.age_s) else round(status.age_s, 3),
                "stale": status.stale,
                "last_error": status.last_error,
            }
        click.echo(json.dumps(payload, indent=2))
        return
    from rich.console import Console

    from greentrain.cli.tables import print_table

    rows = [[p.start.strftime("%Y-%m-%d %H:%M"), p.end.strftime("%Y-%m-%d %H:%M"), f"{p.intensity_g_per_kwh:.1f}",
             str(p.kind), str(p.emission_factor), p.provider, p.zone, "yes" if p.estimated else "no"]
            for p in points]
    console = Console()
    print_table(console, title, ("start (UTC)", "end (UTC)", "gCO2eq/kWh", "kind", "factor", "provider", "zone",
                                 "estimated"), rows, right=("gCO2eq/kWh",))
    if status is not None:
        stale = " [bold red]STALE[/]" if status.stale else ""
        console.print(f"provider in use: {status.provider}, value age {status.age_s:.0f} s{stale}")
        if status.last_error:
            console.print(f"last error: {status.last_error}", markup=False)


def _common(func: F) -> F:
    options = [
        click.option("--zone", required=True, help="Zone: Electricity Maps id (GB, DE-LU, US-CAL-CISO), a WattTime "
                     "region (CAISO_NORTH), or for ukgrid postcode:BS16 / region:11."),
        click.option("--provider", "provider", default=None, help=_PROVIDER_HELP),
        click.option("--api-base", default=None, help="Base URL of the HTTP provider (proxies, tests)."),
        click.option("--column", type=click.Choice(["direct", "lca"]), default="direct",
                     help="CSV traces: direct or lifecycle (LCA) intensity."),
        click.option("--json", "as_json", is_flag=True, help="Machine-readable output."),
        click.option("--timeout", "timeout_s", type=click.FloatRange(0.1, 120.0), default=10.0, show_default=True,
                     help="Total deadline of one provider call in seconds (connect, reads and retries)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log each provider failure as it happens.")
def carbon(verbose: bool) -> None:
    """Read grid carbon intensity: now, forecast, history; list providers; record and score forecasts."""
    # Fallbacks are reported once in the output (status / error line), not as log noise.
    logger = logging.getLogger("greentrain.signals")
    previous = logger.level
    logger.setLevel(logging.INFO if verbose else logging.ERROR)
    click.get_current_context().call_on_close(lambda: logger.setLevel(previous))  # for this command only


@carbon.command()
@_common
def now(zone: str, provider: str | None, api_base: str | None, column: str, as_json: bool, timeout_s: float) -> None:
    """The current carbon intensity of ZONE."""
    from greentrain.signals import SignalChain

    source, _clock = _build(zone, provider, api_base, column, timeout_s)
    try:
        if isinstance(source, SignalChain):
            _emit([source.latest()], as_json, f"Carbon intensity now: {zone}", source.status())
        else:
            _emit([source.latest(zone)], as_json, f"Carbon intensity now: {zone}")
    finally:
        source.close()


@carbon.command()
@_common
@click.option("--hours", type=click.IntRange(1, 168), default=72, show_default=True, help="Forecast horizon.")
def forecast(
    zone: str, provider: str | None, api_base: str | None, column: str, as_json: bool, timeout_s: float, hours: int
) -> None:
    """Forecast for ZONE (the provider's own, else greentrain's causal forecaster)."""
    from greentrain.signals import SignalChain

    source, clock = _build(zone, provider, api_base, column, timeout_s)
    chain = source if isinstance(source, SignalChain) else SignalChain([source], zone=zone, clock=clock)
    try:
        points = chain.forecast(hours)
        if provider and not points and chain.status().last_error:
            raise SignalError(f"--provider {provider}: no forecast ({chain.status().last_error})")
        if not points:  # say why, rather than an empty table
            reason = _why_no_forecast(chain)
            click.echo(f"greentrain: no forecast for {zone}: {reason}", err=True)
            if as_json:
                click.echo(json.dumps({"points": [], "reason": reason}, indent=2))
            return
        _emit(points, as_json, f"Carbon intensity forecast: {zone}, next {hours} h")
    finally:
        chain.close()


@carbon.command()
@_common
@click.option("--hours", type=click.IntRange(1, 24 * 31), default=24, show_default=True, help="How far back.")
def history(
    zone: str, provider: str | None, api_base: str | None, column: str, as_json: bool, timeout_s: float, hours: int
) -> None:
    """Actual carbon intensity of ZONE over the last --hours hours."""
    from greentrain.signals import SignalChain

    source, clock = _build(zone, provider, api_base, column, timeout_s)
    end = clock.now()
    start = end - timedelta(hours=hours)
    try:
        if isinstance(source, SignalChain):
            points = source.history(start, end)
        else:
            points = source.history(zone, start, end)
        _emit(points, as_json, f"Carbon intensity history: {zone}, last {hours} h")
    finally:
        source.close()


@carbon.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def providers(as_json: bool) -> None:
    """List carbon-intensity providers: whether each has what it needs here (keys), and whether it was reached.

    Nothing is fetched: a provider that needs the network says "not checked" (try it with ``carbon now``)."""
    from greentrain.signals import make_provider, provider_names

    rows = []
    for name in provider_names():
        if name == "csv":
            rows.append({"name": name, "configured": True, "reachable": "offline",
                         "note": "use --provider csv:PATH (Electricity Maps export)"})
            continue
        network = True
        try:
            instance = make_provider(name)
            configured = bool(instance.configured())
            network = instance.uses_network
            instance.close()
            note = _NOTES.get(name, "")
        except ConfigError as e:
            configured, note = False, str(e)
        reachable = "not checked" if network else "offline"
        rows.append({"name": name, "configured": configured, "reachable": reachable, "note": note})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Carbon-intensity providers")
    for header in ("provider", "key", "reachable", "how"):
        table.add_column(header)
    for row in rows:
        key = ("not needed" if str(row["note"]).startswith(("no key", "use --provider")) else "set") \
            if row["configured"] else "missing"
        table.add_row(str(row["name"]), key, str(row["reachable"]), str(row["note"]))
    console = Console()
    console.print(table)
    console.print("reachable: nothing was fetched; try one with "
                  "'greentrain carbon now --zone GB --provider ukgrid'", markup=False)


_NOTES = {
    "electricitymaps": "token in $ELECTRICITYMAPS_TOKEN or token_file",
    "watttime": "$WATTTIME_USER and $WATTTIME_PASSWORD (or password_file)",
    "ukgrid": "no key; zones GB, postcode:BS16, region:1-17",
    "static": "no key; CodeCarbon annual averages",
}


# Forecasts as issued: record, archive export/import, skill (their own module, one group).
from greentrain.cli.carbonarchive import archive as _archive_group, record as _record, skill as _skill  # noqa: E402

for _command in (_record, _archive_group, _skill):
    carbon.add_command(_command)
