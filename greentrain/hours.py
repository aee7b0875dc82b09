"""Hour arithmetic shared by the planners and the forecast trackers.

Carbon forecasts come per hour, plans are made per hour, and a forecast's
error is scored per hour ahead: all of them key intervals by the start of their
hour, computed here once.
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["floor_hour"]


def floor_hour(when: datetime) -> datetime:
    """The start of ``when``'s hour, in ``when``'s own timezone."""
    return when.replace(minute=0, second=0, microsecond=0)
