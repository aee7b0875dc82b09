"""The fleet controller: every round, read Slurm, plan the whole fleet, act on the plan through Slurm.

One round (``FleetController.round``):

1. read every job and node from slurmctld; the managed jobs are those with a
   ``greentrain-fleet(...)`` tag in their comment (``fleet_tag``);
2. book the work each job has done (Slurm's start times and restart counts,
   plus the journal), and build the planner's view of each job;
3. plan (``greentrain.fleet.plan_fleet``) on each partition's capacity and
   zone, with the forecast known now: where as well as when, each job on its
   places (``fleet_moves``);
4. act: a pending job the plan runs now on another partition is moved there
   (``scontrol update JobId=N Partition=P``), gets ``StartTime=now`` and is
   released if held; a pending job the plan starts later waits, with that
   ``StartTime``, in the partition whose zone is cleanest over its planned
   hours; a running job the plan pauses or runs elsewhere gets USR1 through
   ``scancel --batch --signal=USR1`` (checkpoint, exit 75, the batch template
   requeues it), and once requeued, its planned place and resume.

Slurm keeps the jobs' state and the journal the rest, so a restarted
controller carries on. It never cancels a job. A Slurm command that fails
changes nothing; the job stays as Slurm had it and the journal keeps a note.
If the controller stops, every pending job still starts at its last planned
start: Slurm enforces it, not the controller.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from greentrain.errors import ActuationError, ConfigError
from greentrain.fleet import FleetPlan, JobStatus, Partition, PlannerConfig, plan_fleet
from greentrain.fleet.metrics import JOB_STATES, FleetSnapshot, FleetStats, JobPlace, PartitionFigures
from greentrain.integrations.fleet_forecast import PlanIntensity
from greentrain.integrations.fleet_journal import FleetJournal, JobEntry
from greentrain.integrations.fleet_moves import book_move, likely_place, place_options, settle_move
from greentrain.integrations.fleet_tag import FleetTag, job_gpus, partition_gpus
from greentrain.integrations.slurm import SlurmClient, parse_slurm_time

__all__ = ["ControllerConfig", "FleetController", "FleetManagedJob", "RoundReport"]

log = logging.getLogger(__name__)

_ACTIVE = ("RUNNING", "CONFIGURING")
_STOPPING = ("COMPLETING", "SUSPENDED")


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    """What the controller needs besides Slurm and the forecast."""

    partitions: dict[str, str]
    """Managed partition -> its grid zone."""
    capacity_gpus: dict[str, int] = field(default_factory=dict)
    """GPUs the plan may use per partition, at most (a partition not named: all its GPUs that are up)."""
    migration_overhead_h: float | None = None
    """Plan hours a started job runs without progress after moving to another partition; None: a resume's."""
    power_kw_per_gpu: float = 0.7
    resume_overhead_h: float = 5.0 / 60.0
    """Plan hours a resumed job runs before it makes progress again."""
    pause_timeout_h: float = 0.25
    """Plan hours a signalled job may take to checkpoint and requeue before the pause is given up."""
    start_tolerance_s: float = 60.0
    """A planned start that moves less than this is left alone (Slurm has one-second times)."""
    planner: PlannerConfig = PlannerConfig()
    dry_run: bool = False
    """Plan and report every action, change nothing in Slurm."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetManagedJob:
    """A fleet job as read from Slurm this round."""

    job_id: str
    state: str
    partition: str
    gpus: int
    tag: FleetTag
    eligible: datetime | None
    started: datetime | None
    restarts: int
    requeue: bool
    held: bool


@dataclass(slots=True)
class RoundReport:
    """What one round saw and did."""

    now: datetime
    plan: FleetPlan | None = None
    actions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class FleetController:
    """Plans and acts on a Slurm cluster's fleet jobs; call ``round(now)`` every interval."""

    def __init__(self, client: SlurmClient, journal: FleetJournal, intensity: PlanIntensity, config: ControllerConfig,
                 stats: FleetStats | None = None) -> None:
        if not config.partitions:
            raise ConfigError("--partition: name at least one partition and its zone (e.g. gpu=GB)")
        self.client, self.journal, self.intensity, self.config = client, journal, intensity, config
        self.stats = stats if stats is not None else FleetStats()
        self._rates: tuple[datetime, float, float] | None = None  # (when, actual g/h, planned g/h)
        self._now_g_per_kwh: dict[str, float] = {}  # partition -> intensity of the current hour
        self._statuses: dict[str, JobStatus] = {}  # this round's planner view of each job
        self._values: tuple[int, dict[str, np.ndarray]] = (0, {})  # (first plan hour, zone -> g/kWh per hour)

    @property
    def migrations(self) -> int:
        """Moves of jobs between partitions Slurm has made since the journal began (kept across restarts)."""
        return self.journal.migrations

    def round(self, now: datetime) -> RoundReport:
        """Observe, plan, act; the journal is saved at the end whatever happened."""
        report = RoundReport(now=now)
        try:
            records, nodes = self.client.jobs(), self.client.nodes()
        except (ActuationError, ConfigError) as e:
            self.journal.slurm_errors += 1
            report.notes.append(f"reading Slurm failed, nothing changed: {e}")
            self._publish(report, None, {}, {})
            self.journal.save()
            return report
        caps = self.config.capacity_gpus
        capacity = {p: min(g, caps.get(p, g)) for p, g in partition_gpus(nodes).items() if p in self.config.partitions}
        managed, unmanaged_gpus = self._read(records, report)
        self.journal.forget_except({m.job_id for m in managed})
        for job in managed:
            self._book(job, now, report)
        plan = self._plan(managed, capacity, unmanaged_gpus, now, report)
        if plan is not None:
            for job in managed:
                self._act(job, plan, now, report)
        self._publish(report, plan, capacity, unmanaged_gpus, managed)
        self.journal.save()
        return report

    def _read(self, records: list[dict[str, str]], report: RoundReport) -> tuple[list[FleetManagedJob], dict[str, int]]:
        managed: list[FleetManagedJob] = []
        unmanaged: dict[str, int] = {}
        for raw in records:
            record = {k: v.strip() for k, v in raw.items()}  # scontrol pads some fields with spaces
            job_id, state = record.get("JobId", ""), record.get("JobState", "")
            partition = record.get("Partition", "")
            try:
                tag = FleetTag.find(record.get("Comment"), job_id)
            except ConfigError as e:
                report.notes.append(str(e))
                tag = None
            if tag is None or partition not in self.config.partitions:
                if state in _ACTIVE + _STOPPING and partition in self.config.partitions:
                    unmanaged[partition] = unmanaged.get(partition, 0) + job_gpus(record)
                continue
            if state not in ("PENDING",) + _ACTIVE + _STOPPING:
                continue  # finished, cancelled or failed: not ours to plan
            gpus = job_gpus(record)
            if gpus < 1:
                report.notes.append(f"job {job_id}: asks for no GPUs (--gpus/--gres=gpu); not planned")
                continue
            managed.append(FleetManagedJob(
                job_id=job_id, state=state, partition=partition, gpus=gpus, tag=tag,
                eligible=parse_slurm_time(record.get("EligibleTime", "")),
                started=parse_slurm_time(record.get("StartTime", "")) if state in _ACTIVE else None,
                restarts=int(record.get("Restarts", "0") or 0), requeue=record.get("Requeue", "0") == "1",
                held=_is_held(record)))
        return managed, unmanaged

    def _book(self, job: FleetManagedJob, now: datetime, report: RoundReport) -> None:
        """Book a move Slurm made, an ended run's work; note the start of a new one."""
        entry = self.journal.entry(job.job_id)
        settled = settle_move(entry, self.journal, job.partition, now)
        if settled is not None:
            report.notes.append(f"job {job.job_id}: {settled}")
        if job.state in _ACTIVE and job.started is not None:
            if entry.run_start != job.started.isoformat():
                if entry.run_start is not None:
                    self._book_run(entry, job, now)
                entry.run_start = job.started.isoformat()
                if entry.done_h > 0 or job.restarts > 0:
                    entry.resumes += 1
            return
        if entry.run_start is not None and job.state == "PENDING":
            self._book_run(entry, job, now)

    def _book_run(self, entry: JobEntry, job: FleetManagedJob, now: datetime) -> None:
        assert entry.run_start is not None
        end = datetime.fromisoformat(entry.pausing_since) if entry.pausing_since else now
        ran_h = max(0.0, self.journal.hours(end) - self.journal.hours(datetime.fromisoformat(entry.run_start)))
        overhead_h = self.config.resume_overhead_h if entry.resumes > 0 else 0.0
        entry.done_h += max(0.0, ran_h - overhead_h)
        entry.run_start, entry.pausing_since, entry.runs_booked = None, None, job.restarts

    def _progress_h(self, job: FleetManagedJob, entry: JobEntry, now: datetime) -> tuple[float, float]:
        """(work done in the run in progress, its resume overhead still to run), plan hours."""
        if entry.run_start is None:
            return 0.0, 0.0
        ran_h = max(0.0, self.journal.hours(now) - self.journal.hours(datetime.fromisoformat(entry.run_start)))
        overhead_h = self.config.resume_overhead_h if entry.resumes > 0 else 0.0
        return max(0.0, ran_h - overhead_h), max(0.0, overhead_h - ran_h)

    def _status(self, job: FleetManagedJob, capacity: dict[str, int], now: datetime) -> JobStatus | None:
        entry = self.journal.entry(job.job_id)
        done_now_h, overhead_left_h = self._progress_h(job, entry, now)
        remaining_h = job.tag.estimate_h - entry.done_h - done_now_h
        running = job.state in _ACTIVE
        overran = remaining_h <= 0.0
        # A job past its estimate is left to finish; plan it one more slot.
        remaining_h = max(remaining_h, 1.0 if overran else 1e-3)
        options = place_options(job.partition, job.gpus, job.gpus * self.config.power_kw_per_gpu, job.tag.places,
                                capacity, running=running)
        if not options:
            return None
        return JobStatus(job_id=job.job_id, options=options, remaining_h=remaining_h,
                         deadline_h=self.journal.hours(job.tag.deadline), partition=job.partition,
                         running=0 if running else None, started=running or entry.done_h > 0 or job.restarts > 0,
                         overhead_left_h=overhead_left_h if running else 0.0,
                         can_pause=running and job.requeue and not overran,
                         migration_overhead_h=self.config.migration_overhead_h)

    def _plan(self, managed: list[FleetManagedJob], capacity: dict[str, int], unmanaged: dict[str, int], now: datetime,
              report: RoundReport) -> FleetPlan | None:
        now_h = self.journal.hours(now)
        statuses, busy = [], dict(unmanaged)
        self._statuses = {}
        for job in managed:
            entry = self.journal.entry(job.job_id)
            if job.state in _STOPPING or entry.pausing_since is not None:
                busy[job.partition] = busy.get(job.partition, 0) + job.gpus  # on its way out: holds its GPUs
                continue
            status = self._status(job, capacity, now)
            if status is None:
                places = ", ".join(f"{p} has {capacity.get(p, 0)}" for p in job.tag.places or capacity)
                report.notes.append(f"job {job.job_id}: {job.gpus} GPUs, more than any of its places holds "
                                    f"({places or 'no partition up'}); not planned")
            else:
                statuses.append(status)
                self._statuses[job.job_id] = status
        parts = {p: Partition(p, g, self.config.partitions[p]) for p, g in capacity.items() if g > 0}
        if not statuses:
            return None
        try:
            first = math.floor(now_h)
            horizon = max(2, math.ceil(max(s.deadline_h for s in statuses)) - first + 1)
            values = {zone: self.intensity(zone, first, horizon, time_of=self.journal.time)
                      for zone in {p.zone for p in parts.values()}}
            self._values = (first, values)
            self._now_g_per_kwh = {name: float(values[p.zone][0]) for name, p in parts.items() if values[p.zone].size}
            free = {p: max(0, g - busy.get(p, 0)) for p, g in capacity.items()}
            plan = plan_fleet(statuses, now_h=now_h, partitions=parts, intensity=values,
                              resume_overhead_h=self.config.resume_overhead_h, free_now=free,
                              config=self.config.planner)
        except ConfigError as e:
            report.notes.append(f"no plan this round, nothing changed: {e}")
            return None
        report.notes.extend(getattr(self.intensity, "notes", [])[-3:])
        report.plan = plan
        return plan

    def _act(self, job: FleetManagedJob, plan: FleetPlan, now: datetime, report: RoundReport) -> None:
        entry = self.journal.entry(job.job_id)
        if entry.pausing_since is not None:
            self._watch_pause(job, entry, now, report)
            return
        planned, status = plan.jobs.get(job.job_id), self._statuses.get(job.job_id)
        if planned is None or status is None or job.state in _STOPPING:
            return
        if planned.late:
            note = "cannot meet its deadline even alone" if planned.infeasible_alone else "planned past its deadline"
            report.notes.append(f"job {job.job_id}: {note}; it runs as soon as capacity allows")
        if job.state == "PENDING":
            start = now if planned.option is not None else self.journal.time(planned.next_start_h or plan.now_h)
            if planned.option is not None:
                target = status.part(planned.option)
            else:
                first, values = self._values
                target = likely_place(status, planned, self.config.partitions, values, first)
            moved = target != job.partition
            if moved and not self._move(job, entry, target, now, report):
                return
            self._start_at(job, entry, max(start, now), now, report, force=moved)
        elif job.state in _ACTIVE:
            where = status.part(planned.option) if planned.option is not None else None
            if where != job.partition:
                self._pause(job, entry, now, report, f"to move to {where}" if where is not None else "")

    def _move(self, job: FleetManagedJob, entry: JobEntry, target: str, now: datetime, report: RoundReport) -> bool:
        """Move a pending job to ``target``; the journal has the move before Slurm is asked (see fleet_moves)."""
        if not self.config.dry_run:
            entry.moving_to = target
            self.journal.save()
        if not self._command(f"job {job.job_id}: move {job.partition} -> {target}", entry, now, report,
                             self.client.set_partition, job.job_id, target):
            entry.moving_to = None
            return False
        if not self.config.dry_run:
            book_move(entry, self.journal, target, now)
        return True

    def _start_at(self, job: FleetManagedJob, entry: JobEntry, start: datetime, now: datetime,
                  report: RoundReport, *, force: bool = False) -> None:
        """Make a pending job eligible at ``start`` (StartTime first, then release a hold); ``force``: set a
        later StartTime even where Slurm's looks right (the job was just moved to another partition)."""
        moved = force or job.eligible is None or \
            abs((job.eligible - start).total_seconds()) >= self.config.start_tolerance_s
        if moved and (start > now or (job.eligible is not None and job.eligible > now)):
            if not self._command(f"job {job.job_id}: StartTime={start.isoformat(timespec='seconds')}", entry, now,
                                 report, self.client.set_start, job.job_id, start):
                return
        if job.held:
            self._command(f"job {job.job_id}: release", entry, now, report, self.client.release, job.job_id)

    def _pause(self, job: FleetManagedJob, entry: JobEntry, now: datetime, report: RoundReport,
               why: str = "") -> None:
        if self._command(f"job {job.job_id}: pause (USR1: checkpoint and requeue{' ' + why if why else ''})",
                         entry, now, report,
                         self.client.signal_batch, job.job_id, "USR1") and not self.config.dry_run:
            entry.pausing_since = now.isoformat()

    def _watch_pause(self, job: FleetManagedJob, entry: JobEntry, now: datetime, report: RoundReport) -> None:
        assert entry.pausing_since is not None
        waited_h = self.journal.hours(now) - self.journal.hours(datetime.fromisoformat(entry.pausing_since))
        if job.state in _ACTIVE and waited_h > self.config.pause_timeout_h:
            entry.note(now, "did not checkpoint and requeue after USR1; left running (is it greentrain's batch "
                            "template with --requeue?)")
            report.notes.append(f"job {job.job_id}: pause not taken after USR1; left running")
            entry.pausing_since = None

    def _command(self, what: str, entry: JobEntry, now: datetime, report: RoundReport, call, *args) -> bool:
        """Run one Slurm command; on failure note it and leave the job as it was."""
        report.actions.append(what + (" (dry run)" if self.config.dry_run else ""))
        if self.config.dry_run:
            return True
        try:
            call(*args)
        except (ActuationError, ConfigError) as e:
            self.journal.slurm_errors += 1
            entry.note(now, f"{what} failed: {e}; left as Slurm had it")
            report.notes.append(f"{what} failed: {e}; left as Slurm had it")
            log.warning("fleet: %s failed: %s", what, e)
            return False
        log.info("fleet: %s", what)
        return True

    def _publish(self, report: RoundReport, plan: FleetPlan | None, capacity: dict[str, int],
                 unmanaged: dict[str, int], managed: list[FleetManagedJob] | None = None) -> None:
        """Book the emissions since the last round (estimated), then publish the snapshot for the metrics."""
        states = dict.fromkeys(JOB_STATES, 0)
        in_use = sum(unmanaged.values())
        actual_gph = planned_gph = 0.0
        for job in managed or []:
            entry = self.journal.entry(job.job_id)
            rate = job.gpus * self.config.power_kw_per_gpu * self._now_g_per_kwh.get(job.partition, 0.0)
            if job.state in _ACTIVE + _STOPPING:
                in_use += job.gpus
                actual_gph += rate
                states["pausing" if entry.pausing_since else "running"] += 1
            else:
                states["paused" if entry.done_h > 0 or job.restarts > 0 else "waiting"] += 1
            planned = plan.jobs.get(job.job_id) if plan is not None else None
            planned_gph += rate if planned is not None and planned.option is not None else 0.0
        if self._rates is not None:  # the rates seen last round held until now
            elapsed_h = max(0.0, self.journal.hours(report.now) - self.journal.hours(self._rates[0]))
            self.journal.emitted_g["actual"] += self._rates[1] * elapsed_h
            self.journal.emitted_g["planned"] += self._rates[2] * elapsed_h
        self._rates = (report.now, actual_gph, planned_gph)
        self.stats.publish(FleetSnapshot(
            gpus_in_use=in_use, gpus_capacity=sum(capacity.values()), jobs=states,
            emitted_g=dict(self.journal.emitted_g),
            planned_remaining_g=plan.planned_emissions_g if plan is not None else None,
            deadlines_at_risk=sum(p.late for p in plan.jobs.values()) if plan is not None else 0,
            slurm_errors=self.journal.slurm_errors, plan_cpu_s=plan.solve_s if plan is not None else None,
            partitions=self._figures(report, plan, capacity, managed)))

    def _figures(self, report: RoundReport, plan: FleetPlan | None, capacity: dict[str, int],
                 managed: list[FleetManagedJob] | None) -> PartitionFigures:
        """Per-partition figures (``FleetStats.meter``); the last ones again when Slurm could not be read."""
        if managed is None:
            return self.stats.snapshot().partitions
        jobs = [JobPlace(job_id=j.job_id, partition=j.partition, gpus=j.gpus,
                         power_kw=j.gpus * self.config.power_kw_per_gpu, running=j.state in _ACTIVE + _STOPPING,
                         started=j.state in _ACTIVE + _STOPPING or j.restarts > 0
                         or self.journal.entry(j.job_id).done_h > 0) for j in managed]
        return self.stats.meter.round(self.journal.hours(report.now), zones=self.config.partitions, capacity=capacity,
                                      intensity_g_per_kwh=self._now_g_per_kwh, jobs=jobs, plan=plan,
                                      statuses=self._statuses.values())


def _is_held(record: Mapping[str, str]) -> bool:
    """Held, as ``scontrol release`` undoes: ``--hold`` (Reason JobHeldUser/JobHeldAdmin) or a requeue in the
    held state (Reason job_requeued_in_held_state); both leave the job at priority 0."""
    return "held" in record.get("Reason", "").lower() or record.get("Priority") == "0"
