"""Option parsing shared by several subcommands (the parsing itself lives in the library)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import click

from greentrain.clock import DEADLINE_HELP
from greentrain.clock import parse_deadline as _parse_deadline
from greentrain.errors import ConfigError
from greentrain.signals.base import IntensityPoint

__all__ = ["parse_deadline", "history_notes", "DEADLINE_HELP"]


def parse_deadline(value: str, now: datetime, param: str = "--deadline") -> datetime:
    """``greentrain.clock.parse_deadline`` as a click usage error (one line naming ``param``)."""
    try:
        return _parse_deadline(value, now, param)
    except ConfigError as e:
        message = str(e).removeprefix(f"{param}: ")
        raise click.BadParameter(message, param_hint=param) from None


def history_notes(points: Sequence[IntensityPoint], first: datetime) -> list[str]:
    """Notes for a replay whose first decision has too little trace behind it for the forecaster; each is
    also printed on stderr (standard output may be JSON)."""
    from greentrain.signals.forecast.forecaster import thin_history_note

    note = thin_history_note(points, first)
    if note is None:
        return []
    click.echo(f"greentrain: note: {note}", err=True)
    return [note]
