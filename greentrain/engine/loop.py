"""The engine: one closed loop run at training-step boundaries.

Each step boundary: measure the step (time on the job clock, energy from the
monitor), price it (energy × the carbon intensity of that interval, and
versus run-now at default settings), and — on rank 0, at most every
``decide_interval_s`` — build a ``Snapshot`` and ask the policy. The deadline
guard then clamps any pause so the job still finishes in time, the decision
is broadcast so every rank acts at the same step, and hardware actions go to
the actuators. Deciding and waiting are separate calls because integrations
act on a pause themselves (save, stop the trainer) before waiting.

Nothing here may crash training: a failing carbon signal, monitor, policy or
actuator degrades to run-now at current settings, with a note in ``notes``
and in the event log.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from collections.abc import Callable
from typing import Any

from greentrain.clock import Clock, SystemClock, ensure_aware_utc
from greentrain.errors import ConfigError, DeadlineError
from greentrain.events import EventLog
from greentrain.jobstats import JobState, JobStats
from greentrain.policies.base import Action, Decision, OperatingPoint, Policy
from greentrain.policies.loader import load_policy
from greentrain.signals.base import IntensityPoint
from greentrain.engine import adopt, decider
from greentrain.engine.broadcast import Broadcast, LocalBroadcast
from greentrain.engine.collaborators import Actuators, CarbonSignal, EnergyMonitor
from greentrain.engine.deadlinewatch import DeadlineVerdict, DeadlineWatch
from greentrain.engine.decider import RUN
from greentrain.engine.guard import latest_safe_resume
from greentrain.engine.jobsummary import step_fields, summary_fields
from greentrain.engine.ledger import CarbonLedger, LedgerEntry
from greentrain.engine.scaler import ReplicaScaler
from greentrain.engine.signalview import SignalView
from greentrain.engine.stats import StepTimes
from greentrain.engine.waiter import Waiter
from greentrain.engine.budget import Budget
from greentrain.engine.waiting import WaitingPower

__all__ = ["Engine", "RUN"]

log = logging.getLogger("greentrain.engine")


class Engine:
    """Drives one job's step boundaries; shared by Session, the trainer, integrations and ``greentrain run``.

    Args:
        policy: a ``Policy`` (or a preset name / TOML path, loaded with ``greentrain.policies.load_policy``).
        signals: carbon source with ``latest()``, ``forecast(horizon_h=)``, ``status()`` (a ``SignalChain``);
            None runs without carbon awareness (run-now, emissions not priced).
        monitor: a started ``greentrain.monitor.Monitor`` (energy per step), or None.
        clock: the job clock (``SystemClock`` by default; ``ReplayClock`` for demos and tests).
        deadline: aware datetime by which the job must finish, or None.
        steps_total: total steps of the job; or give ``work_total_s`` for jobs without steps.
        job_stats / event_log / actuators / broadcast: shared state for exporters, the JSONL log, hardware
            actions, rank 0's decisions (``greentrain.engine.TorchBroadcast``; None = one process).
        steps_done / work_total_s: steps already done (resume); or the run time the job needs (``run``).
        step_time_s: expected step time before any is measured (lets ``begin`` plan a delayed start).
        resume_overhead_s / deadline_policy: override the policy's settings ('strict' or 'best-effort').
        decide_interval_s / progress: re-plan at least this often (job-clock s); a countdown while waiting.
        operating_points: measured power/speed profile for power decisions (``set_operating_points`` later).
        waiting_power_w / hardware_released: what a pause costs (``greentrain.engine.waiting``): the user's
            figure, else 0 when paused jobs release their hardware, else the held devices' measured idle draw.
        budget: carbon/energy limits (``greentrain.engine.budget``): warn once, stop at a checkpoint when spent.
    """

    def __init__(
        self,
        policy: Policy | str,
        *,
        signals: CarbonSignal | None = None,
        monitor: EnergyMonitor | None = None,
        clock: Clock | None = None,
        deadline: datetime | None = None,
        steps_total: int | None = None,
        job_stats: JobStats | None = None,
        event_log: EventLog | None = None,
        actuators: Actuators | None = None,
        broadcast: Broadcast | None = None,
        steps_done: int = 0,
        work_total_s: float | None = None,
        step_time_s: float | None = None,
        resume_overhead_s: float | None = None,
        deadline_policy: str | None = None,
        decide_interval_s: float = 300.0,
        forecast_horizon_h: float = 72.0,
        progress: bool = True,
        operating_points: tuple[OperatingPoint, ...] = (),
        waiting_power_w: float | None = None,
        hardware_released: bool = False,
        budget: Budget | None = None,
    ) -> None:
        self.policy = load_policy(policy)
        self.operating_points = tuple(operating_points)
        settings = getattr(self.policy, "settings", None)
        self.clock = clock or SystemClock()
        self.deadline = ensure_aware_utc(deadline, "deadline") if deadline is not None else None
        if steps_total is not None and steps_total < 0:
            raise ConfigError(f"steps_total: must be >= 0, got {steps_total}")
        self.steps_total = steps_total
        self.steps_done = int(steps_done)
        self.work_total_s = work_total_s
        self.monitor = monitor
        self.job_stats = job_stats if job_stats is not None else JobStats()
        self.event_log = event_log
        self.actuators = actuators
        self.broadcast = broadcast or LocalBroadcast()
        self.resume_overhead_s = float(
            resume_overhead_s if resume_overhead_s is not None else getattr(settings, "resume_overhead_s", 0.0) or 0.0
        )
        self.deadline_policy = deadline_policy or getattr(settings, "deadline_policy", None) or "strict"
        if self.deadline_policy not in ("strict", "best-effort"):
            raise ConfigError(f"deadline_policy: {self.deadline_policy!r} is not 'strict' or 'best-effort'")
        if decide_interval_s <= 0:
            raise ConfigError(f"decide_interval_s: must be > 0, got {decide_interval_s}")
        self.decide_interval_s = float(decide_interval_s)
        self.times = StepTimes(prior_s=step_time_s)
        self.rate_probe: Callable[[], float | None] | None = None
        """Optional ``() -> seconds per step`` (job clock) called at re-plans during waits; see ``StepTimes``."""
        self.scaler: ReplicaScaler | None = None
        """An elastic job's replica actuator (``greentrain.engine.scaling``); None = a fixed-size job."""
        self.ledger = CarbonLedger()
        self.signals = SignalView(signals, horizon_h=forecast_horizon_h, on_note=self.note, on_event=self.event)
        self.waiter = Waiter(self, progress=progress)
        self.budget = Budget.resolve(budget, settings)
        if waiting_power_w is None:
            waiting_power_w = getattr(settings, "waiting_power_w", None)
        self.waiting = WaitingPower(user_w=waiting_power_w, released=hardware_released, on_note=self.note,
                                    on_event=self.event)
        self.notes: list[str] = []
        self.state = JobState.WAITING
        self.decision: Decision = RUN
        self.first_start: datetime | None = None
        """When the first step ran."""
        self.submitted_at: datetime | None = None
        """When the job asked to start (``begin``): run-now's start, the counterfactual's origin."""
        self.running_s = 0.0
        """Job-clock seconds spent stepping (pauses excluded): the run-now counterfactual's time axis."""
        self.best_effort = False
        self.guard_engaged = False
        """Set once the deadline guard cut a pause short: from then on the job runs to the end
        (the schedule is tight; more pauses would only chop the remaining run into slivers)."""
        self._step_started: datetime | None = None
        self.next_decide_at: datetime | None = None
        self._closed = False
        self.last_logged: tuple[Action, str] = (Action.RUN, "")
        self._shared_version = 0
        self.last_step_s: float | None = None
        """Job-clock duration of the last step (seconds)."""
        self.last_step_energy_j: float | None = None
        """Monitor energy of the last step (joules); None without a monitor."""
        self.decided_on: tuple = ()
        """Fingerprint of the carbon data behind the last decision (periodic re-plans skip identical data)."""
        self.deadline_watch = DeadlineWatch(self.deadline, simulated=not isinstance(self.clock, SystemClock))
        """Warns once on stderr when the measured rate says the deadline will be missed (rank 0)."""
        self.finished_at: datetime | None = None
        """When the step that completed the job ended (job clock)."""
        self.deadline_verdict: DeadlineVerdict | None = None
        """Met or missed, set by ``close`` (None without a deadline)."""
        self.job_stats.update(deadline=self.deadline)

    # ---- public loop API -------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether this rank decides (rank 0)."""
        return self.broadcast.is_leader

    def begin(self) -> Decision:
        """Call once before the first step: validates the deadline and may return DELAY_START (all ranks)."""
        now = self.clock.now()
        if self.submitted_at is None:
            self.submitted_at = now
        if self.first_start is None and self.is_leader:
            self.waiting.observe_start(self.held_power_w())  # what pauses cost until one is measured
        payload: tuple[Decision, str | None, Any] | None = None
        if self.is_leader:
            error = decider.check_deadline(self, now)
            decision = decider.decide(self, now, JobState.WAITING) if not error else RUN
            payload = (decision, error, self._point_to_share())
        decision, error, point = self.broadcast.share(payload)
        self._observe_shared(point)
        if error is not None:
            raise DeadlineError(error)
        if decision.action == Action.PAUSE:  # before the first step a pause is a delayed start
            decision = replace(decision, action=Action.DELAY_START)
        self.adopt(decision, now)
        if decision.action == Action.RUN:
            self.set_state(JobState.RUNNING, now)
        return adopt.acted_on(self, decision)

    def step_begin(self) -> None:
        """Mark the start of a training step."""
        self._step_started = self.clock.now()
        if self.first_start is None:
            self.first_start = self._step_started
        if self.state != JobState.RUNNING:
            self.set_state(JobState.RUNNING, self._step_started)
        if self.monitor is not None:
            self.guarded("monitor.step_begin", self.monitor.step_begin)

    def step_end(self, tokens: int = 0, loss: Any = None) -> Decision:
        """Close the step: account it, maybe re-plan (rank 0), broadcast; returns the Decision to act on."""
        now = self.clock.now()
        started = self._step_started or now
        self._step_started = None
        duration_s = max(0.0, (now - started).total_seconds())
        energy_j, source = 0.0, None
        if self.monitor is not None:
            step_energy = self.guarded("monitor.step_end", self.monitor.step_end)
            energy_j = float(getattr(step_energy, "energy_j", 0.0) or 0.0)
            source = getattr(step_energy, "source", None)  # 'interpolated' for a step under 0.2 s
        self.times.add(duration_s)
        self.last_step_s, self.last_step_energy_j = duration_s, (energy_j if self.monitor is not None else None)
        counterfactual_at = (self.submitted_at or started) + timedelta(seconds=self.running_s)
        self.running_s += duration_s
        self.steps_done += 1
        if self.finished_at is None and self.finished:
            self.finished_at = now
        entry = self.ledger.record(energy_j, started + (now - started) / 2, counterfactual_at)
        self.job_stats.add(steps=1, tokens=int(tokens), energy_j=entry.energy_j,
                           emissions_g=entry.emissions_g, emissions_avoided_g=entry.avoided_g)
        self.mark_unpriced(entry)
        if source is not None:
            self.job_stats.update(last_step_energy_j=entry.energy_j, last_step_source=str(source))
        self._log_step(now, duration_s, entry, tokens, loss, source)
        payload = (decider.maybe_decide(self, now), self._point_to_share()) if self.is_leader else None
        decision, point = self.broadcast.share(payload)
        self._observe_shared(point)
        self.adopt(decision, now)
        return adopt.acted_on(self, decision)

    def _point_to_share(self) -> tuple[IntensityPoint, ...] | None:
        """Leader: carbon points other ranks have not seen yet (they price their own steps with them)."""
        if self.broadcast.world_size == 1 or self.signals.version == self._shared_version:
            return None
        self._shared_version = self.signals.version
        return self.signals.known_points()

    def _observe_shared(self, points: tuple[IntensityPoint, ...] | None) -> None:
        if points and not self.is_leader:
            self.ledger.observe_many(points)

    def wait_until(self, when: datetime | None, reason: str = "") -> bool:
        """Block until ``when`` on all ranks (rank 0 re-plans and may wake earlier); True if ``interrupt()``ed."""
        return self.waiter.wait(when, reason)

    def interrupt(self) -> None:
        """Make a running ``wait_until`` return at once (e.g. from a signal handler)."""
        self.waiter.interrupt()

    def close(self, **summary: Any) -> None:
        """Write the summary event (``summary`` adds or overrides fields), restore actuators and stop the
        scheduler; safe to call twice.

        ``finished_at`` in ``summary`` overrides when the job ended (``greentrain run``: the command's exit);
        a job that finished after its deadline gets one ``DEADLINE MISSED`` line on stderr (rank 0).
        """
        if self._closed:
            return
        self._closed = True
        self.waiter.shutdown()
        if self.actuators is not None:
            self.guarded("actuators.restore_all", self.actuators.restore_all)
        finished = bool(summary.get("finished", self.finished))
        finished_at = summary.pop("finished_at", None) or self.finished_at
        self.deadline_verdict = self.deadline_watch.verdict(finished_at if finished else None)
        if self.is_leader:
            self.deadline_watch.announce_miss(self.deadline_verdict)
        if self.event_log is not None:
            fields = summary_fields(self, finished_at if finished else None)
            self.event_log.write("summary", self.clock.now(), **{**fields, **summary})

    @property
    def deadline_missed(self) -> bool:
        """The job finished after its deadline (known after ``close``)."""
        verdict = self.deadline_verdict
        return verdict is not None and verdict.finished_at is not None and not verdict.met

    # ---- derived quantities -----------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """All planned steps (or all estimated work) done."""
        if self.steps_total is not None:
            return self.steps_done >= self.steps_total
        if self.work_total_s is not None:
            return self.running_s >= self.work_total_s
        return False

    def work_remaining_s(self, pessimistic: bool = False) -> float | None:
        """Running time still needed, job-clock seconds (None when unknown)."""
        if self.steps_total is not None:
            steps_left = max(0, self.steps_total - self.steps_done)
            if pessimistic:
                return self.times.upper_total_s(steps_left)
            step_s = self.times.mean_s
            return None if step_s is None else steps_left * step_s
        if self.work_total_s is not None:
            # The user's estimate is the only knowledge here; the jitter of polling intervals says nothing
            # about it, so the guard's safety fraction is the only margin.
            return max(0.0, self.work_total_s - self.running_s)
        return None

    def latest_safe_resume(self) -> datetime | None:
        """Latest (re)start that meets the deadline at the pessimistic step time (None: no deadline)."""
        work_s = self.work_remaining_s(pessimistic=True)
        if self.deadline is None or work_s is None:
            return None
        margin_s = self.times.pessimistic_s or 0.0
        return latest_safe_resume(self.deadline, work_s, resume_overhead_s=self.resume_overhead_s, margin_s=margin_s)

    # ---- deciding (greentrain.engine.decider) -------------------------------------------------------

    def replan_paused(self, now: datetime, force: bool = True) -> datetime | None:
        """Leader, during a wait: re-decide with fresh signals; the new resume time (now = run now,
        None = keep the plan: without ``force`` only changed carbon data triggers a new decision)."""
        return decider.replan_paused(self, now, force)

    # ---- applying ---------------------------------------------------------------------------------

    def adopt(self, decision: Decision, now: datetime) -> None:
        """Act on a (broadcast) decision: state, wait plan, hardware actions."""
        adopt.adopt(self, decision, now)

    def set_operating_points(self, points: tuple[OperatingPoint, ...]) -> None:
        """Measured profile (from the profiler after warm-up): policies may then choose power limits."""
        self.operating_points = tuple(points)
        self.next_decide_at = None  # re-plan at the next step with the new options

    def set_state(self, state: JobState, now: datetime, until: datetime | None = None) -> None:
        """Enter ``state`` (job stats and a ``state`` event; ``until`` = the planned end of a wait)."""
        if state == self.state and until is None:
            return
        self.state = state
        self.job_stats.update(state=state)
        if self.event_log is not None:
            fields = {"until": until} if until is not None else {}
            self.event_log.write("state", now, state=state.value, **fields)

    def mark_running(self, now: datetime) -> None:
        """After a wait: the next step is a warm-up (not counted in step statistics)."""
        self.times.restart()
        self.next_decide_at = None
        self.set_state(JobState.RUNNING, now)

    # ---- helpers ----------------------------------------------------------------------------------

    def power_w(self) -> float | None:
        """The monitor's current draw (W), None without one or when it fails."""
        if self.monitor is None:
            return None
        value = self.guarded("monitor.power_w", self.monitor.power_w)
        return float(value) if isinstance(value, (int, float)) else None

    def held_power_w(self) -> float | None:
        """Draw of the devices a pause would hold (the monitor's GPUs); the whole draw for simpler monitors."""
        read = getattr(self.monitor, "held_power_w", None) or getattr(self.monitor, "power_w", None)
        value = self.guarded("monitor.held_power_w", read) if read is not None else None
        return float(value) if isinstance(value, (int, float)) else None

    def guarded(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
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
        if self.event_log is not None:
            self.event_log.write("note", self.clock.now(), message=message)

    def event(self, event: str, **fields: Any) -> None:
        """Write one event to the run log at the job clock's now (no-op without a log)."""
        if self.event_log is not None:
            self.event_log.write(event, self.clock.now(), **fields)

    def mark_unpriced(self, entry: LedgerEntry) -> None:
        """Record once why emissions are unknown (the job stats carry it to metrics and the summary)."""
        if not entry.priced and self.job_stats.emissions_unknown_reason is None:
            reason = self.signals.unknown_reason()
            self.job_stats.update(emissions_unknown_reason=reason)
            self.note(f"emissions unknown: {reason}")

    def _log_step(self, now: datetime, duration_s: float, entry: Any, tokens: int, loss: Any,
                  source: Any = None) -> None:
        if self.event_log is not None:
            self.event_log.write("step", now, **step_fields(self, duration_s, entry, tokens, loss, source))
