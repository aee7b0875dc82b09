"""``--forecast-archive`` and its companions, shared by ``greentrain simulate`` and ``greentrain fleet simulate``:
replay forecasts as they were issued (a provider's, recorded with ``greentrain carbon record``) instead of, or
weighed against, greentrain's own forecaster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from greentrain.errors import ConfigError

if TYPE_CHECKING:
    from greentrain.signals.archive.replay import ArchiveForecaster, OwnForecaster
    from greentrain.sim.forecastarchive import LoadedArchive

Archived = tuple["LoadedArchive", "ArchiveForecaster"]
"""An archive loaded for a replay, and the forecaster that reads it."""

__all__ = ["archive_flags", "archive_forecaster", "archive_line", "archive_summary"]

F = TypeVar("F", bound=Callable[..., object])


def archive_flags(command: F) -> F:
    """Add ``--forecast-archive``, ``--archive-provider``, ``--forecast-blend`` and ``--archive-max-age-hours``."""
    options = [
        click.option("--forecast-archive", "archive_path", type=click.Path(dir_okay=False, path_type=Path),
                     default=None,
                     help="Forecasts as issued (archive SQLite file or issued_at,target_time,intensity_g_per_kwh "
                          "CSV): each decision uses the latest issued at or before it; the trace-only forecaster "
                          "fills past its end and gaps."),
        click.option("--archive-provider", default=None,
                     help="The archive's series to use when it has several for the zone."),
        click.option("--forecast-blend", type=click.Choice(("skill", "latest")), default="skill", show_default=True,
                     help="skill: weigh the archived forecast against the trace-only forecaster by their measured "
                          "errors per hour ahead; latest: take it as exact."),
        click.option("--archive-max-age-hours", type=float, default=None,
                     help="An archived forecast older than this at a decision counts as a gap (default: 6, or twice "
                          "the archive's usual time between issues when longer)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def archive_forecaster(opts: Mapping[str, Any], zone: str, own: OwnForecaster,
                       own_is_perfect: bool) -> Archived | None:
    """(the loaded archive, its forecaster) when ``--forecast-archive`` was given, else None; ``own`` fills past
    its end and its gaps. A bad file, row set or flag is a ConfigError naming it."""
    if opts["archive_path"] is None:
        return None
    from greentrain.sim.forecastarchive import load_forecast_archive, make_archive_forecaster

    if own_is_perfect:
        raise ConfigError("--forecast-archive: replays forecasts as issued; it cannot be combined with perfect "
                          "foresight (--forecaster perfect, --forecast perfect)")
    if opts["archive_max_age_hours"] is not None and not opts["archive_max_age_hours"] > 0:
        raise ConfigError(f"--archive-max-age-hours: must be > 0, got {opts['archive_max_age_hours']:g}")
    loaded = load_forecast_archive(opts["archive_path"], zone, opts["archive_provider"])
    return loaded, make_archive_forecaster(loaded, own, blend=opts["forecast_blend"],
                                           max_age_h=opts["archive_max_age_hours"])


def archive_summary(archived: Archived, blend: str) -> dict[str, Any]:
    """The ``forecast_archive`` entry of a ``--json`` summary."""
    from greentrain.sim.forecastarchive import summary

    return summary(archived[0], archived[1], blend)


def archive_line(archived: Mapping[str, Any]) -> str:
    """One line for the terminal: which forecasts were replayed, and how many decisions fell in a gap."""
    skipped = sum(archived["skipped_rows"].values())
    return (f"forecasts as issued: {archived['provider']}/{archived['zone']} from {archived['file']} "
            f"({archived['issues']} issues, blend {archived['blend']}); {archived['fallback_hours']} of "
            f"{archived['forecast_hours']} decision hours had no forecast within {archived['max_age_hours']:g} h "
            f"(archive gap) and used the trace-only forecaster; {archived['extended_hours']} reached past the "
            "archived forecast"
            + (f"; {skipped} rows left out ({', '.join(f'{n} {k}' for k, n in archived['skipped_rows'].items())})"
               if skipped else ""))
