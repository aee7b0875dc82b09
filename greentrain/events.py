"""The JSONL run log: one JSON object per line, written by the monitor and the engine.

Every line has ``t`` (ISO-8601 UTC, of the job's clock) and ``event``. Events:

- ``sample``   — device readings: ``device``, ``kind`` (gpu|cpu), ``power_w``, ``energy_j``, ``source``
- ``step``     — ``step``, ``duration_s``, ``energy_j``, ``emissions_g``, optional ``loss``, ``tokens``,
  ``source`` (``measured``, or ``interpolated`` for a step under 0.2 s) when a monitor measures energy
- ``carbon``   — ``intensity_g_per_kwh``, ``kind``, ``provider``, ``zone``; written when the value changes
- ``forecast`` — the points new or changed since the previous ``forecast`` event (all of them in the first;
  none: no event) as ``start``, ``interval_s``, ``values`` (evenly spaced) or ``points``: ``[start,
  intensity_g_per_kwh]`` pairs (uneven, and logs before issue 38); ``count``: points in the forecast read.
  ``forecast_points`` reads either form
- ``state``    — ``state`` (running|paused|waiting), optional ``until`` (a wait's planned resume: the time the
  terminal and the summary give)
- ``action``   — ``action``, ``reason``, optional ``power_limit_w``, ``precision``, ``until``, ``replicas``;
  for a pause ``until`` is the planned resume and ``next_look`` when the policy looks again
- ``replicas`` — carbon scaling: ``kind`` (planned|actual), ``replicas`` (0 = paused or released)
- ``rescale``  — carbon scaling: a change of count asked for: ``replicas_from``, ``replicas_to``, ``accepted``
- ``summary``  — totals at exit: ``energy_j``, ``emissions_g``, ``emissions_avoided_g``, ...

The report command and tests read this; keep additions backward compatible.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from greentrain.errors import ConfigError

if TYPE_CHECKING:
    from greentrain.userfile import JSONObject

__all__ = ["EventLog", "NoEventLog", "forecast_points", "read_events"]


def _default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if hasattr(value, "value"):  # enums
        return value.value
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class EventLog:
    """Append-only JSONL writer, safe to call from several threads; line-buffered so a crash loses nothing."""

    def __init__(self, path: str | Path) -> None:
        self.path: Path | None = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file: TextIO | None = self.path.open("a", encoding="utf-8", buffering=1)
        except OSError as e:
            raise ConfigError(f"--jsonl {self.path}: cannot write ({e.strerror}); choose a writable path") from None
        self._lock = threading.Lock()

    def write(self, event: str, t: datetime, **fields: object) -> None:
        """Append one event at time ``t`` (aware UTC)."""
        line = json.dumps({"t": t, "event": event, **fields}, default=_default, allow_nan=False)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> "EventLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NoEventLog(EventLog):
    """Stands where no run log was asked for: every event is dropped, so writers never check for a log."""

    def __init__(self) -> None:  # opens nothing
        self.path = None
        self._file = None
        self._lock = threading.Lock()

    def write(self, event: str, t: datetime, **fields: object) -> None:
        """Dropped (nothing is serialised)."""


def read_events(path: str | Path) -> list[JSONObject]:
    """Read a run log; a truncated last line (crash mid-write) is ignored, other bad lines are errors."""
    from greentrain.userfile import LOG_MAX_BYTES, read_text

    path = Path(path)
    lines = read_text(path, what="run log", max_bytes=LOG_MAX_BYTES).splitlines()
    events: list[JSONObject] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError):
            if number == len(lines):
                break
            raise ConfigError(f"{path}:{number}: not a JSON line") from None
    return events


def forecast_points(event: dict[str, object]) -> list[object]:
    """The ``[start, value]`` pairs of a ``forecast`` event in either form (ISO start strings as logged; the
    items of ``points`` as they are, for the reader to check). Raises ValueError for a bad ``start``."""
    if "values" in event:
        start = datetime.fromisoformat(str(event["start"]).replace("Z", "+00:00"))
        step = timedelta(seconds=float(event.get("interval_s") or 3600.0))  # type: ignore[arg-type]
        values = event["values"] if isinstance(event["values"], list) else []
        return [[(start + i * step).isoformat().replace("+00:00", "Z"), v] for i, v in enumerate(values)]
    points = event.get("points")
    return list(points) if isinstance(points, list) else []
