"""Turn a run's JSONL event log into time series for the report.

Reads the events ``greentrain.events`` documents (``sample``, ``step``,
``carbon``, ``forecast``, ``state``, ``action``, ``replicas``, ``summary``) and the
engine's ``note``; unknown events
are skipped so newer logs still render. A field of the wrong type is an error
naming the line's event number and the field.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.events import forecast_points, read_events
from greentrain.units import J_PER_KWH
from greentrain.userfile import JSONObject

__all__ = ["RunData", "StepRecord", "counterfactual_run_now", "load_run"]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One training step: when it ended, how long it took, its energy and emissions."""

    t: datetime
    duration_s: float
    energy_j: float
    emissions_g: float | None
    source: str | None = None
    """Where the step's energy came from ('measured', 'interpolated' for a step under 0.2 s); None in old logs."""


@dataclass(slots=True)
class RunData:
    """Everything the report plots, in time order."""

    source: Path
    power_w: dict[str, list[tuple[datetime, float]]] = field(default_factory=dict)
    steps: list[StepRecord] = field(default_factory=list)
    intensity: list[tuple[datetime, float, str]] = field(default_factory=list)
    """(t, gCO2eq/kWh, kind) from ``carbon`` events."""
    forecast: list[tuple[datetime, float]] = field(default_factory=list)
    """Points of the first ``forecast`` event (what the policy saw at the start)."""
    states: list[tuple[datetime, str]] = field(default_factory=list)
    actions: list[dict[str, object]] = field(default_factory=list)
    """Each ``action`` event's fields, its ``t`` parsed to a datetime."""
    advice: list[dict[str, object]] = field(default_factory=list)
    """Advisory mode: each decision advised, not applied, with its estimated effect (``t`` a datetime)."""
    replicas: list[tuple[datetime, str, int]] = field(default_factory=list)
    """Carbon scaling: (t, 'planned' or 'actual', count) from ``replicas`` events; empty for a fixed-size job."""
    summary: JSONObject = field(default_factory=dict)
    notes: list[tuple[datetime, str]] = field(default_factory=list)
    """Engine ``note`` events: what failed or degraded during the run."""
    zone: str | None = None
    start: datetime | None = None
    end: datetime | None = None

    def intensity_at(self, t: datetime) -> float | None:
        """Intensity in effect at ``t`` (last carbon value at or before it, else the first forecast point)."""
        times = [p[0] for p in self.intensity]
        i = bisect.bisect_right(times, t) - 1
        if i >= 0:
            return self.intensity[i][1]
        ftimes = [p[0] for p in self.forecast]
        j = bisect.bisect_right(ftimes, t) - 1
        if j >= 0:
            return self.forecast[j][1]
        return self.intensity[0][1] if self.intensity else None

    def step_emissions_g(self, step: StepRecord) -> float | None:
        """The step's logged emissions, or its energy x the intensity in effect then."""
        if step.emissions_g is not None:
            return step.emissions_g
        intensity = self.intensity_at(step.t - timedelta(seconds=step.duration_s / 2))
        return None if intensity is None else step.energy_j / J_PER_KWH * intensity


def _time(event: JSONObject, where: str, key: str = "t") -> datetime:
    value = event.get(key)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{where}: {key!r} is not an ISO-8601 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise ConfigError(f"{where}: {key!r} has no timezone: {value!r}")
    return parsed


def _number(event: JSONObject, key: str, where: str, default: float | None = None) -> float | None:
    value = event.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where}: {key!r} must be a finite number, got {value!r}")
    return float(value)


def _add(run: RunData, event: JSONObject, t: datetime, where: str) -> None:
    kind = event.get("event")
    if kind == "sample":
        power = _number(event, "power_w", where)
        if power is not None:
            run.power_w.setdefault(str(event.get("device", "device")), []).append((t, power))
    elif kind == "step":
        run.steps.append(StepRecord(t, _number(event, "duration_s", where, 0.0) or 0.0,
                                    _number(event, "energy_j", where, 0.0) or 0.0,
                                    _number(event, "emissions_g", where),
                                    str(event["source"]) if event.get("source") is not None else None))
    elif kind == "carbon":
        value = _number(event, "intensity_g_per_kwh", where)
        if value is not None:
            run.intensity.append((t, value, str(event.get("kind", "actual"))))
            zone = event.get("zone")
            if zone is not None and not isinstance(zone, str):
                raise ConfigError(f"{where}: 'zone' must be a string, got {zone!r}")
            run.zone = run.zone or zone
    elif kind == "forecast" and not run.forecast:
        try:
            points = forecast_points(dict(event))  # start/interval_s/values, or [start, value] pairs
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: 'start' and 'interval_s' must be an ISO-8601 time and seconds") from None
        for i, point in enumerate(points):
            if not isinstance(point, (list, tuple)) or len(point) != 2:
                raise ConfigError(f"{where}: points[{i}] must be [start, intensity_g_per_kwh]")
            run.forecast.append((_time({"t": point[0]}, f"{where} points[{i}]"),
                                 _number({"v": point[1]}, "v", f"{where} points[{i}]") or 0.0))
    elif kind == "state":
        run.states.append((t, str(event.get("state", "running"))))
    elif kind == "action":
        run.actions.append({"t": t, **{k: v for k, v in event.items() if k not in ("t", "event")}})
    elif kind == "replicas":
        count = _number(event, "replicas", where)
        if count is not None:
            run.replicas.append((t, str(event.get("kind", "actual")), int(count)))
    elif kind == "advice":
        run.advice.append({"t": t, **{k: v for k, v in event.items() if k not in ("t", "event")}})
    elif kind == "note":
        run.notes.append((t, str(event.get("message", ""))))
    elif kind == "summary":
        run.summary.update({k: v for k, v in event.items() if k not in ("t", "event")})


def load_run(path: str | Path) -> RunData:
    """Parse a run log. Raises ConfigError naming the file and event for bad content."""
    path = Path(path)
    events = read_events(path)
    run = RunData(source=path)
    for number, event in enumerate(events, start=1):
        where = f"{path}: event {number} ({event.get('event', '?')})"
        if not isinstance(event, dict) or "event" not in event:
            raise ConfigError(f"{where}: not an event object with an 'event' field")
        t = _time(event, where)
        run.start = t if run.start is None else min(run.start, t)
        run.end = t if run.end is None else max(run.end, t)
        _add(run, event, t, where)
    if run.start is None:
        raise ConfigError(f"{path}: the run log has no events")
    for series in (run.intensity, run.forecast, run.states, run.steps, run.replicas):
        series.sort(key=lambda item: item[0] if isinstance(item, tuple) else item.t)
    return run


def counterfactual_run_now(run: RunData) -> list[tuple[datetime, float]]:
    """Cumulative emissions if the same steps (same energy) had run back to back from the start, no pauses."""
    if run.start is None or not run.steps:
        return []
    t = run.start
    total_g = 0.0
    curve = [(t, 0.0)]
    for step in run.steps:
        # Intensity at the step's midpoint, as for the real run (step_emissions_g).
        intensity = run.intensity_at(t + timedelta(seconds=step.duration_s / 2))
        if intensity is None:
            return []
        t += timedelta(seconds=step.duration_s)
        total_g += step.energy_j / J_PER_KWH * intensity
        curve.append((t, total_g))
    return curve
