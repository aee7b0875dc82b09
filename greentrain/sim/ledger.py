"""Execution of a schedule on a trace: the one place the simulator charges energy and emissions.

Each call to ``step`` is one trace interval, run at a mode or paused. A run
after a pause first spends the resume overhead at full power without
progress; the job stops part-way through the interval where its work ends.
A paused interval after the first start draws the job's ``waiting_power_w``
(held hardware idling); waiting before the first start draws nothing.
An elastic job (modes with ``replicas``) also pays the overhead, at the new
count's power, whenever it runs at another count than in the interval before.
With zones (several ``--trace ZONE=FILE``) each step names its zone: a resume
in another zone than the one the job last ran in pays the job's migration
overhead instead of the resume overhead, and is counted as a migration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from greentrain.policies.slot_planner import J_PER_KWH, Mode, StartState
from greentrain.signals.base import IntensityPoint
from greentrain.sim.job import SimJob
from greentrain.sim.noise import RateProfile

__all__ = ["Interval", "Ledger"]

_DONE_S = 1e-6


@dataclass(slots=True)
class Interval:
    """A contiguous running interval at one power limit."""

    start: datetime
    end: datetime
    power_limit_w: float | None = None
    replicas: int | None = None
    """Carbon scaling: the replica count (None for a fixed-size job)."""
    zone: str | None = None
    """The grid zone it ran in (None: the one-trace simulator)."""


@dataclass(slots=True)
class Ledger:
    """Running totals of one simulated job."""

    job: SimJob
    remaining_s: float = field(init=False)
    state: StartState = StartState.FRESH
    energy_j: float = 0.0
    emissions_g: float = 0.0
    """Running, resume and waiting emissions (net)."""
    waiting_energy_j: float = 0.0
    """Of ``energy_j``: drawn while paused after the first start."""
    resumes: int = 0
    rescales: int = 0
    """Changes of replica count while running (each paid the overhead); resumes are counted apart."""
    replicas: int = 0
    """Replicas running after the last interval (0 = paused or not started)."""
    zone: str | None = None
    """The zone the job last ran in (its checkpoint and held hardware); None before the first run."""
    migrations: int = 0
    """Resumes in another zone than the last run's (each paid the migration overhead; not in ``resumes``)."""
    emissions_by_zone_g: dict[str, float] = field(default_factory=dict)
    """Of ``emissions_g``, by zone (only steps that name a zone)."""
    schedule: list[Interval] = field(default_factory=list)
    finished_at: datetime | None = None
    rates: RateProfile | None = None
    """The realised work rate (``sim/noise.py``); None: always 1.0."""
    origin: datetime | None = None
    """Where ``rates`` count from (the run's start)."""
    last_rate: float = 1.0
    """The realised rate of the last interval run (what a running job measures)."""

    def __post_init__(self) -> None:
        self.remaining_s = self.job.work_s

    @property
    def done(self) -> bool:
        return self.remaining_s <= _DONE_S

    def step(self, point: IntensityPoint, mode: Mode | None, zone: str | None = None) -> None:
        """Spend interval ``point`` (of ``zone``'s trace, if named) running at ``mode`` (None = paused)."""
        if self.done:
            return
        if mode is None:
            if self.state != StartState.FRESH:
                wait_j = self.job.waiting_power_w * (point.end - point.start).total_seconds()
                self.waiting_energy_j += wait_j
                self.energy_j += wait_j
                self._emit(wait_j * point.intensity_g_per_kwh / J_PER_KWH, zone)
                self.state = StartState.PAUSED
                self.replicas = 0
            return
        length_s = (point.end - point.start).total_seconds()
        rate = self.rate_over(point.start, point.end)
        self.last_rate = rate
        resume = self.state == StartState.PAUSED
        rescale = (self.state == StartState.RUNNING and mode.replicas is not None
                   and mode.replicas != self.replicas)
        migrate = resume and zone is not None and self.zone is not None and zone != self.zone
        over_s = min(self.job.overhead_s(zone, self.zone), length_s) if resume or rescale else 0.0
        run_s = min(length_s, over_s + self.remaining_s / (mode.speed * rate))
        # A relaunch at a new count runs at that count's power; a plain resume at full power. The same work
        # costs the same energy at any rate: a slowed job (shared node, stalled loader) draws less while it
        # takes longer (sim/noise.py).
        over_w = mode.power_w if mode.replicas is not None else self.job.full.power_w
        slot_j = over_w * over_s + mode.power_w * rate * (run_s - over_s)
        self.remaining_s -= mode.speed * rate * (run_s - over_s)
        self.energy_j += slot_j
        self._emit(slot_j * point.intensity_g_per_kwh / J_PER_KWH, zone)
        self.resumes += resume and over_s > 0 and not migrate
        self.migrations += migrate
        self.rescales += rescale
        self.zone = zone
        self.state = StartState.RUNNING
        self.replicas = mode.replicas or 0
        end = point.start + timedelta(seconds=run_s)
        last = self.schedule[-1] if self.schedule else None
        if (last is not None and last.end == point.start and last.power_limit_w == mode.power_limit_w
                and last.replicas == mode.replicas and last.zone == zone):
            last.end = end
        else:
            self.schedule.append(Interval(point.start, end, mode.power_limit_w, mode.replicas, zone))
        if self.done:
            self.remaining_s = 0.0
            self.finished_at = end

    def _emit(self, grams: float, zone: str | None) -> None:
        self.emissions_g += grams
        if zone is not None:
            self.emissions_by_zone_g[zone] = self.emissions_by_zone_g.get(zone, 0.0) + grams

    def rate_over(self, start: datetime, end: datetime) -> float:
        """The realised rate's mean over [start, end) (1.0 without noise)."""
        if self.rates is None or self.origin is None:
            return 1.0
        return self.rates.mean_rate((start - self.origin).total_seconds(), (end - self.origin).total_seconds())

    @property
    def energy_kwh(self) -> float:
        return self.energy_j / J_PER_KWH

    @property
    def waiting_energy_kwh(self) -> float:
        return self.waiting_energy_j / J_PER_KWH
