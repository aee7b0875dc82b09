"""The engine: one closed loop run at training-step boundaries.

Each step boundary: measure the step (time on the job clock, energy from the
monitor), price it (energy × the carbon intensity of that interval, and
versus run-now at default settings), and — on rank 0, at most every
``decide_interval_s`` — build a ``Snapshot`` and ask the policy. The deadline
guard then clamps any pause so the job still finishes in time, the decision
is broadcast so every rank acts at the same step, and hardware actions go to
the actuators. Deciding and waiting are separate calls because integrations
act on a pause themselves (save, stop the trainer) before waiting.

The loop owns the job's ``Progress``; each part owns its own state (see
``core.EngineCore``). Nothing here may crash training: a failing carbon
signal, monitor, policy or actuator degrades to run-now at current settings,
with a note in ``notes`` and in the event log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from greentrain.engine.adopt import Adopter, acted_on
from greentrain.engine.budget import Budget
from greentrain.engine.carbonview import CarbonView
from greentrain.engine.collaborators import Collaborators, HoldsDevices, Loss, NoMonitor
from greentrain.engine.decider import RUN, Decider
from greentrain.engine.deadline_guard import DeadlineGuard
from greentrain.engine.jobsummary import step_fields, summary_fields
from greentrain.engine.ledger import CarbonLedger, LedgerEntry
from greentrain.engine.pausecost import PauseCost
from greentrain.engine.progress import Progress
from greentrain.engine.resumenotice import kept_resume
from greentrain.engine.scaler import Scaling
from greentrain.engine.waiter import Waiter
from greentrain.errors import DeadlineError
from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, OperatingPoint, Policy
from greentrain.policies.worth import DEFAULT_MIN_SAVING_FRAC
from greentrain.signals.base import IntensityPoint

__all__ = ["Engine", "RUN"]

log = logging.getLogger("greentrain.engine")

T = TypeVar("T")


class Engine:
    """Drives one job's step boundaries; shared by Session, the trainer, integrations and ``greentrain run``.

    Built by ``greentrain.job.build.build_job`` from a job's options; each argument but the policy has a
    default that stands for "none" (no carbon signal, no monitor, no deadline, no budget).

    Args:
        policy: the loaded ``Policy`` (``greentrain.policies.load_policy`` loads a name or a file).
        io: what the engine drives and reports to: clock, carbon signal, monitor, actuators, run log,
            broadcast (rank 0's decisions to every rank), job stats (``Collaborators``).
        progress: steps (or running seconds) of the job, done and to do (``greentrain.engine.progress``).
        deadline: the deadline and its guard (``DeadlineGuard.for_policy`` takes the policy's settings).
        pause_cost: what a pause costs (``greentrain.engine.pausecost``): the user's figure, else 0 when
            paused jobs release their hardware, else the held devices' measured idle draw.
        budget: carbon/energy limits (``greentrain.engine.budget``): warn once, stop at a checkpoint when spent.
        decide_interval_s: re-plan at least this often (job-clock seconds).
        countdown: a countdown on the terminal while waiting (rank 0).
        forecast_horizon_h: how far ahead the carbon forecast is read.
        operating_points: measured power/speed profile for power decisions (``set_operating_points`` later).
        min_wait_saving: a wait must save more than this fraction of the job's expected emissions
            (``policies/worth.py``).
        scaling: an elastic job's replica actuator and allowed range (carbon scaling, ``engine/scaling.py``);
            None: a fixed-size job.
    """

    def __init__(
        self,
        policy: Policy,
        io: Collaborators | None = None,
        *,
        progress: Progress | None = None,
        deadline: DeadlineGuard | None = None,
        pause_cost: PauseCost | None = None,
        budget: Budget | None = None,
        decide_interval_s: float = 300.0,
        countdown: bool = True,
        forecast_horizon_h: float = 72.0,
        operating_points: tuple[OperatingPoint, ...] = (),
        min_wait_saving: float = DEFAULT_MIN_SAVING_FRAC,
        scaling: Scaling | None = None,
    ) -> None:
        self.policy = policy
        self.io = io or Collaborators()
        self.clock = self.io.clock
        self.progress = progress or Progress()
        settings = policy.settings
        self.deadline = deadline or DeadlineGuard.for_policy(None, settings, simulated=self.clock.simulated)
        self.pause_cost = pause_cost or PauseCost.for_policy(settings)
        self.budget = Budget.resolve(budget, settings)
        self.decider = Decider(decide_interval_s, min_wait_saving=min_wait_saving)
        self.adopter = Adopter()
        self.operating_points = tuple(operating_points)
        self.scaling = scaling
        self.notes: list[str] = []
        self.ledger = CarbonLedger()
        self.signals = CarbonView(self.io.signals, horizon_h=forecast_horizon_h, on_note=self.note,
                                  on_event=self.event)
        self.waiter = Waiter(self, countdown=countdown)
        self.measures_energy = not isinstance(self.io.monitor, NoMonitor)
        """Whether the monitor measures energy (a ``NoMonitor`` does not: the job's energy is unknown)."""
        self._state = JobState.WAITING
        self.logged_until: datetime | None = None
        """The ``until`` of the last ``state`` event (the resume the run log gives; None while running)."""
        self._step_started: datetime | None = None
        self._closed = False
        self._shared_version = 0
        self.io.job_stats.update(deadline=self.deadline.at)

    # ---- public loop API -------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether this rank decides (rank 0)."""
        return self.io.broadcast.is_leader

    @property
    def state(self) -> JobState:
        """Running, paused or waiting (to start)."""
        return self._state

    @property
    def decision(self) -> Decision:
        """The decision in force (the last one that changed something)."""
        return self.adopter.current

    @property
    def finished(self) -> bool:
        """All planned steps (or all estimated work) done."""
        return self.progress.finished

    def last_decision(self) -> Decision:
        """The last decision rank 0 made, re-plans during a wait included (what the terminal reports)."""
        return self.decider.last

    @property
    def decide_interval_s(self) -> float:
        """Longest time between two decisions (job-clock seconds)."""
        return self.decider.interval_s

    @property
    def deadline_missed(self) -> bool:
        """The job finished after its deadline (known after ``close``)."""
        return self.deadline.missed

    def begin(self) -> Decision:
        """Call once before the first step: the deadline's one check; may return DELAY_START (all ranks), or
        PAUSE when this process continues a job already under way (a relaunch)."""
        now = self.clock.now()
        self.progress.submit(now)
        if self.progress.first_start is None and self.is_leader:
            self.pause_cost.observe_start(self._held_power_w())  # what pauses cost until one is measured
        payload: tuple[Decision, str | None, tuple[IntensityPoint, ...] | None] | None = None
        if self.is_leader:
            error = self.decider.check_start(self, now)
            state = JobState.WAITING if self.progress.first_start is None else JobState.PAUSED  # a relaunch
            decision = self.decider.decide(self, now, state) if not error else RUN
            payload = (decision, error, self._points_to_share())
        decision, error, points = self.io.broadcast.share(payload)
        self._observe_shared(points)
        if error is not None:
            raise DeadlineError(error)
        if decision.action == Action.PAUSE and self.progress.first_start is None:
            decision = replace(decision, action=Action.DELAY_START)  # before the first step: a delayed start
        elif decision.action == Action.DELAY_START and self.progress.first_start is not None:
            decision = replace(decision, action=Action.PAUSE)  # a relaunch of a job under way: still a pause
        self.adopter.adopt(self, decision, now)
        if decision.action == Action.RUN:
            self.set_state(JobState.RUNNING, now)
        return acted_on(self, decision)

    def step_begin(self) -> None:
        """Mark the start of a training step."""
        self._step_started = now = self.clock.now()
        self.progress.start_step(now)
        if self._state != JobState.RUNNING:
            self.set_state(JobState.RUNNING, now)
        self.guarded("monitor.step_begin", self.io.monitor.step_begin)

    def step_end(self, tokens: int = 0, loss: Loss = None) -> Decision:
        """Close the step: account it, maybe re-plan (rank 0), broadcast; returns the Decision to act on."""
        now = self.clock.now()
        started = self._step_started or now
        self._step_started = None
        reading = self.guarded("monitor.step_end", self.io.monitor.step_end)
        energy_j = float(reading.energy_j or 0.0) if reading is not None else 0.0
        source = reading.source if reading is not None else None  # 'interpolated' for a step under 0.2 s
        counterfactual_at = self.progress.add_step(started, now, energy_j if self.measures_energy else None)
        entry = self.charge(energy_j, started + (now - started) / 2, counterfactual_at, steps=1, tokens=tokens)
        if source is not None:
            self.io.job_stats.update(last_step_energy_j=entry.energy_j, last_step_source=str(source))
        self.io.event_log.write("step", now, **step_fields(self, entry, tokens, loss, source))
        if self.progress.times.rate.moved:  # the robust rate left the one the plan used: plan again now
            self.decider.due_again()
        payload = (self.decider.maybe_decide(self, now), self._points_to_share()) if self.is_leader else None
        decision, points = self.io.broadcast.share(payload)
        self._observe_shared(points)
        self.adopter.adopt(self, decision, now)
        return acted_on(self, decision)

    def wait_until(self, when: datetime | None, reason: str = "") -> bool:
        """Block until ``when`` on all ranks (rank 0 re-plans and may wake earlier); True if ``interrupt()``ed."""
        return self.waiter.wait(when, reason)

    def interrupt(self) -> None:
        """Make a running ``wait_until`` return at once (e.g. from a signal handler)."""
        self.waiter.interrupt()

    def continue_at(self, steps_done: int) -> None:
        """Train again in this process from ``steps_done`` (a framework resumed from its checkpoint)."""
        self.progress.continue_at(steps_done)

    def close(self, *, finished: bool | None = None, finished_at: datetime | None = None,
              **summary: object) -> None:
        """Write the summary event (``summary`` adds or overrides fields), restore actuators and stop the
        scheduler; safe to call twice.

        ``finished``/``finished_at`` override whether and when the job ended (``greentrain run``: the
        command's exit); a job that finished after its deadline gets one ``DEADLINE MISSED`` line on stderr
        (rank 0).
        """
        if self._closed:
            return
        self._closed = True
        self.waiter.close_scheduler()
        actuators = self.io.actuators
        if actuators is not None:
            self.guarded("actuators.restore_all", actuators.restore_all)
        done = self.progress.finished if finished is None else finished
        ended_at = (finished_at or self.progress.finished_at) if done else None
        verdict = self.deadline.judge(ended_at)
        if self.is_leader:
            self.deadline.watch.announce_miss(verdict)
        fields = summary_fields(self, ended_at)
        if finished is not None:
            fields["finished"] = finished
        self.io.event_log.write("summary", self.clock.now(), **{**fields, **summary})

    # ---- what the parts call -------------------------------------------------------------------------

    def replan_paused(self, now: datetime, force: bool = True) -> datetime | None:
        """Leader, during a wait: re-decide with fresh signals; the new resume time (now = run now, None =
        keep the plan: without ``force`` only changed carbon data triggers a new decision)."""
        return self.decider.replan_paused(self, now, force)

    def set_operating_points(self, points: tuple[OperatingPoint, ...]) -> None:
        """Measured profile (from the profiler after warm-up): policies may then choose power limits."""
        self.operating_points = tuple(points)
        self.decider.due_again()  # re-plan at the next step with the new options

    def set_state(self, state: JobState, now: datetime, until: datetime | None = None) -> None:
        """Enter ``state`` (job stats and a ``state`` event; ``until`` = the planned end of a wait)."""
        if state == self._state and until is None:
            return
        self._state = state
        self.logged_until = until
        self.io.job_stats.update(state=state)
        self.io.event_log.write("state", now, state=state.value, **({"until": until} if until is not None else {}))

    def resume_of(self, decision: Decision, now: datetime | None = None) -> datetime | None:
        """The one resume time of a pause or delayed start (``engine/resumenotice.kept_resume``): the plan's
        resume, guard-clamped. The terminal, the run log, a checkpoint pause's ``resume_at`` and the summary
        all give this time (None for a decision that runs)."""
        now = now or self.clock.now()
        return kept_resume(decision, now, self.deadline.latest_safe_resume(self.progress))

    def mark_running(self, now: datetime) -> None:
        """After a wait: the next step is a warm-up (not counted in step statistics)."""
        self.progress.restart()
        self.decider.due_again()
        self.set_state(JobState.RUNNING, now)

    def charge(self, energy_j: float, at: datetime, counterfactual_at: datetime | None, *, steps: int = 0,
               tokens: int = 0) -> LedgerEntry:
        """Price ``energy_j`` spent at ``at`` (run-now would have spent it at ``counterfactual_at``; None: not
        at all, as a pause's idle draw) and add it to the job's totals."""
        entry = self.ledger.record(energy_j, at, counterfactual_at)
        self.io.job_stats.add(steps=steps, tokens=int(tokens), energy_j=entry.energy_j,
                              emissions_g=entry.emissions_g, emissions_avoided_g=entry.avoided_g)
        if not entry.priced and self.io.job_stats.emissions_unknown_reason is None:
            reason = self.signals.unknown_reason()  # said once: the job stats carry it to metrics and the summary
            self.io.job_stats.update(emissions_unknown_reason=reason)
            self.note(f"emissions unknown: {reason}")
        return entry

    def log_pause_cost(self) -> None:
        """A ``waiting_power`` event when the draw pauses are planned with (or its source) changed."""
        fields = self.pause_cost.log_fields()
        if fields is not None:
            self.event("waiting_power", **fields)

    def plan_power_w(self) -> tuple[float | None, str]:
        """The draw plans are priced with, per job-clock second of running, and where it came from: the job's
        measured steps (the energy the summary prices), else the devices' reading at start, else the
        monitor's current reading."""
        measured = self.progress.measured_power_w
        if measured is not None:
            return measured, "the job's measured power"
        speedup = self.clock.speedup or 1.0  # a replayed clock runs faster than the watts it measures
        start_w = self.pause_cost.start_w
        if start_w is not None and start_w > 0:
            return start_w / speedup, "the devices' reading at start (no step measured yet)"
        now_w = self.power_w()
        if now_w is None:
            return None, "no power measured"
        return now_w / speedup, "the devices' reading now (no step measured yet)"

    def power_w(self) -> float | None:
        """The monitor's current draw (W), None without one or when it fails."""
        value = self.guarded("monitor.power_w", self.io.monitor.power_w)
        return float(value) if isinstance(value, int | float) else None

    def _held_power_w(self) -> float | None:
        """Draw of the devices a pause would hold (the monitor's GPUs); the whole draw for simpler monitors."""
        monitor = self.io.monitor
        read = monitor.held_power_w if isinstance(monitor, HoldsDevices) else monitor.power_w
        value = self.guarded("monitor.held_power_w", read)
        return float(value) if isinstance(value, int | float) else None

    def guarded(self, what: str, fn: Callable[..., T], *args: object) -> T | None:
        """Call a collaborator; on any failure note it once and carry on (training must not crash)."""
        try:
            return fn(*args)
        except Exception as e:
            self.note(f"{what} failed ({type(e).__name__}: {e}); continuing without it")
            return None

    def note(self, message: str) -> None:
        """Say once why something degraded: log warning, ``notes`` and a ``note`` event."""
        if message in self.notes:
            return
        self.notes.append(message)
        log.warning("greentrain: %s", message)
        self.io.event_log.write("note", self.clock.now(), message=message)

    def event(self, event: str, **fields: object) -> None:
        """Write one event to the run log at the job clock's now."""
        self.io.event_log.write(event, self.clock.now(), **fields)

    # ---- sharing carbon points with the other ranks --------------------------------------------------

    def _points_to_share(self) -> tuple[IntensityPoint, ...] | None:
        """Leader: carbon points other ranks have not seen yet (they price their own steps with them)."""
        if self.io.broadcast.world_size == 1 or self.signals.version == self._shared_version:
            return None
        self._shared_version = self.signals.version
        return self.signals.known_points()

    def _observe_shared(self, points: tuple[IntensityPoint, ...] | None) -> None:
        if points and not self.is_leader:
            self.ledger.observe_many(points)
