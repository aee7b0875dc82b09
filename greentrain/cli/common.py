"""Option parsing shared by several subcommands."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

__all__ = ["parse_deadline", "DEADLINE_HELP"]

DEADLINE_HELP = "Deadline: ISO-8601 with timezone (2026-11-22T06:00Z) or '+H' hours from now (+12)."


def parse_deadline(value: str, now: datetime, param: str = "--deadline") -> datetime:
    """Parse ``+H`` (hours from ``now``) or an aware ISO-8601 time; BadParameter otherwise."""
    text = value.strip()
    if text.startswith("+"):
        try:
            hours = float(text[1:])
        except ValueError:
            raise click.BadParameter(f"{text!r} is not '+H' hours (e.g. +12)", param_hint=param) from None
        if hours <= 0:
            raise click.BadParameter(f"{text!r}: hours must be > 0", param_hint=param)
        return now + timedelta(hours=hours)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not ISO-8601 (e.g. 2026-11-22T06:00Z)", param_hint=param) from None
    if parsed.tzinfo is None:
        raise click.BadParameter(f"{text!r} has no timezone; add 'Z' or '+01:00'", param_hint=param)
    return parsed.astimezone(UTC)
