"""The demo's scenario: which day of which shipped trace, how much work, which deadline.

The default start times below were chosen with the simulator (the same
carbon-aware policy code and the same forecaster the live engine uses), not
by hand: ``find_scenarios`` lists the 2022 days on which the policy *delays
the start*, *pauses at least once* and *still meets the deadline* for 0.8×,
1× and 1.25× the work (a live run's step time varies), best saving first.
From that list we took the best day that also finishes hours before its
deadline (GB's top days end at 23:05, too close for a busy machine).
Re-run the search with::

    python -m greentrain.demo --zone GB                     # midnight starts, 24 h deadline
    python -m greentrain.demo --zone US-CAL-CISO --start-hour 18 --deadline-hours 30

(or, for one day, ``greentrain simulate --trace greentrain/data/carbon/GB_2022_hourly.csv
--start 2022-03-14T00:00Z --work-hours 8 --deadline-hours 24``).
The demo itself runs the live engine on a replay clock, not the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import click

from greentrain.errors import ConfigError

__all__ = [
    "ATTRIBUTION",
    "DEFAULT_DEADLINE_H",
    "DEFAULT_STARTS",
    "Candidate",
    "Scenario",
    "default_scenario",
    "find_scenarios",
    "main",
    "shipped_trace",
]

ATTRIBUTION = 'Contains data from Electricity Maps (electricitymaps.com), licensed under ODbL'
"""The Open Database License attribution the shipped traces require (see greentrain/data/README.md)."""

_TRACES = {"GB": "GB_2022_hourly.csv", "US-CAL-CISO": "US-CAL-CISO_2022_hourly.csv"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One demo job on the trace's calendar."""

    zone: str
    """Grid zone label (metrics, summary)."""
    trace: Path
    """Electricity Maps hourly CSV replayed as the carbon signal."""
    start: datetime
    """Simulated time the job is submitted (aware UTC, a whole hour of the trace)."""
    work_h: float = 8.0
    """Running time the job needs at full speed, simulated hours."""
    deadline_h: float = 24.0
    """The job must finish within this many simulated hours of ``start``."""
    speedup: float = 480.0
    """Simulated seconds per real second (480: a day of trace in 3 minutes)."""

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            raise ConfigError(f"start: {self.start.isoformat()} has no timezone; add 'Z'")
        for name, value in (("work_h", self.work_h), ("deadline_h", self.deadline_h), ("speedup", self.speedup)):
            if not value > 0:
                raise ConfigError(f"{name}: must be > 0, got {value}")
        if self.deadline_h < self.work_h:
            raise ConfigError(f"deadline: {self.deadline_h:g} h is shorter than the work ({self.work_h:g} h)")

    @property
    def deadline(self) -> datetime:
        """Absolute simulated deadline."""
        return self.start + timedelta(hours=self.deadline_h)


# Found with `python -m greentrain.demo --zone ZONE` (8 h of work, carbon-aware, default forecaster; see the
# module docstring). California has one clean (solar) window a day, so its job is submitted at 18:00 UTC with
# 30 h to run: part of this afternoon's window, a pause overnight, the rest in tomorrow's.
DEFAULT_STARTS: dict[str, datetime] = {
    "GB": datetime(2022, 3, 14, tzinfo=UTC),
    "US-CAL-CISO": datetime(2022, 5, 15, 18, tzinfo=UTC),
}
DEFAULT_DEADLINE_H: dict[str, float] = {"GB": 24.0, "US-CAL-CISO": 30.0}


def shipped_trace(zone: str) -> Path:
    """Path of the trace shipped for ``zone``; ConfigError naming the valid zones otherwise."""
    name = _TRACES.get(zone)
    if name is None:
        raise ConfigError(f"--zone: no shipped trace for {zone!r}; use one of {', '.join(_TRACES)} or --trace CSV")
    return Path(str(resources.files("greentrain.data").joinpath("carbon", name)))


def default_scenario(zone: str = "GB") -> Scenario:
    """The chosen day for ``zone`` on its shipped trace."""
    return Scenario(zone=zone, trace=shipped_trace(zone), start=DEFAULT_STARTS[zone],
                    deadline_h=DEFAULT_DEADLINE_H[zone])


@dataclass(frozen=True, slots=True)
class Candidate:
    """A simulated start that shows every behaviour the demo is meant to show."""

    start: datetime
    saving: float
    """Fraction of run-now's emissions the policy avoided."""
    schedule: list[tuple[datetime, datetime]]


def find_scenarios(trace: Path, *, work_h: float = 8.0, deadline_h: float = 24.0, policy: str = "carbon-aware",
                   every_h: int = 24, work_spread: tuple[float, ...] = (1.0,),
                   between: tuple[datetime, datetime] | None = None) -> list[Candidate]:
    """Simulate a start every ``every_h`` hours; keep the days that delay, pause and meet the deadline, best first.

    The demo's job is as long as it was sized (each step is a fixed share of the
    work, ``greentrain.demo.clock``); ``work_spread`` (factors of ``work_h``) asks
    for all three behaviours at other work sizes too. ``between`` limits the starts
    (default: the whole trace after its first week).
    """
    from greentrain.policies import load_policy
    from greentrain.signals.forecast.forecaster import Forecaster
    from greentrain.signals.trace import load_trace
    from greentrain.sim import SimJob, TraceIndex, simulate

    points = load_trace(trace)
    index = TraceIndex(points, str(trace))
    first = points[0].start.replace(hour=0) + timedelta(days=7)  # a week of history for the forecaster
    last = points[-1].end - timedelta(hours=deadline_h)
    if between is not None:
        first, last = max(first, between[0]), min(last, between[1])
    starts = [first + timedelta(hours=every_h * i) for i in range(int((last - first) / timedelta(hours=every_h)) + 1)]
    kept: dict[datetime, Candidate] | None = None
    for factor in sorted(work_spread, key=lambda f: f != 1.0):  # nominal first: its schedule is reported
        job = SimJob.constant_power(power_kw=1.0, work_h=work_h * factor, deadline_h=deadline_h,
                                    resume_overhead_min=5.0)
        found = {}
        for result in simulate(index, starts, job, load_policy(policy), Forecaster()):
            runs = [(i.start, i.end) for i in result.policy.schedule]
            delayed = bool(runs) and runs[0][0] > result.start
            if delayed and result.policy.resumes >= 1 and result.deadline_met:
                run_now_g = result.run_now.emissions_g
                found[result.start] = Candidate(result.start, (run_now_g - result.policy.emissions_g) / run_now_g,
                                                runs)
        kept = found if kept is None else {t: c for t, c in kept.items() if t in found}
        starts = sorted(kept)
        if not starts:
            break
    return sorted((kept or {}).values(), key=lambda c: -c.saving)


@click.command(help="Find demo days on a shipped trace with the simulator.")
@click.option("--zone", default="GB", show_default=True, type=click.Choice(sorted(_TRACES)))
@click.option("--work-hours", type=float, default=8.0, show_default=True)
@click.option("--deadline-hours", type=float, default=24.0, show_default=True)
@click.option("--start-hour", type=click.IntRange(0, 23), default=0, show_default=True,
              help="UTC hour of day of the starts.")
@click.option("--top", type=click.IntRange(1), default=5, show_default=True)
@click.option("--until", "until", type=click.DateTime(["%Y-%m-%d"]), default=None,
              help="Last start day searched (default: the end of the trace's year).")
def main(zone: str, work_hours: float, deadline_hours: float, start_hour: int, top: int,
         until: datetime | None) -> None:
    """``python -m greentrain.demo``: print the days that show the demo's behaviours, best first."""
    first = datetime(2022, 1, 8, start_hour, tzinfo=UTC)
    last = until.replace(hour=start_hour, tzinfo=UTC) if until is not None else datetime(2023, 1, 1, tzinfo=UTC)
    found = find_scenarios(shipped_trace(zone), work_h=work_hours, deadline_h=deadline_hours, between=(first, last))
    print(f"{len(found)} starts delay, pause and meet the deadline; best savings vs run-now:")
    for c in found[:top]:
        runs = ", ".join(f"{a:%H:%M}-{b:%H:%M}" for a, b in c.schedule)
        print(f"  {c.start:%Y-%m-%dT%H:%MZ}  saving {100 * c.saving:5.1f} %  runs {runs}")
