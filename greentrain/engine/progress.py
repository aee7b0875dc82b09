"""How far a job is: steps and running time on the job clock, and when it was submitted, started and finished.

Owned by the loop, which records each step; the deadline guard, the decider
and the budget read it. ``running_s`` is the run-now counterfactual's time
axis: a step that follows ``running_s`` seconds of earlier running would have
run at ``submitted_at + running_s`` had the job never paused. A relaunched
job's progress is restored from its saved state, so '+H' deadlines and totals
span every process of the job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from datetime import datetime, timedelta

from greentrain.engine.stats import StepTimes
from greentrain.policies.rate import estimate_room_s

__all__ = ["Progress"]


@dataclass(kw_only=True)
class Progress:
    """Steps (or running seconds) done and to do, and the job's step-time statistics."""

    steps_total: int | None = None
    """Total steps of the job; or give ``work_total_s`` for a job without steps (``greentrain run``)."""
    work_total_s: float | None = None
    """Running time the job needs, job-clock seconds (when it has no steps)."""
    steps_done: int = 0
    """Steps done, this process's and earlier ones' (a resume starts here)."""
    step_time_s: InitVar[float | None] = None
    """Expected step time before any is measured (lets ``begin`` plan a delayed start)."""
    estimate_error: InitVar[float] = 0.0
    """How much longer than estimated the work left may take (``JobOptions.estimate_error``)."""
    rate_probe: Callable[[], float | None] | None = None
    """``() -> seconds per step`` (job clock), asked at re-plans while the job waits: a busier machine moves
    the deadline guard's latest safe resume up before the wait ends."""
    times: StepTimes = field(default_factory=StepTimes)
    running_s: float = 0.0
    """Job-clock seconds spent stepping (pauses excluded)."""
    submitted_at: datetime | None = None
    """When the job asked to start (``begin``): run-now's start, the counterfactual's origin."""
    first_start: datetime | None = None
    """When the first step ran."""
    finished_at: datetime | None = None
    """When the step that completed the job ended (job clock)."""
    last_step_s: float | None = None
    """Job-clock duration of the last step (seconds)."""
    last_step_energy_j: float | None = None
    """Monitor energy of the last step (joules); None when nothing measures the job."""
    measured_energy_j: float = 0.0
    """Energy of the job's measured steps (joules): with ``measured_running_s``, the job's power."""
    measured_running_s: float = 0.0
    """Job-clock seconds of the job's measured steps."""

    def __post_init__(self, step_time_s: float | None, estimate_error: float) -> None:
        if step_time_s is not None:
            self.times.prior_s = step_time_s
        self.times.rate.prior_spread = estimate_error

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
            # The user's estimate is the only knowledge here (the jitter of polling intervals says nothing
            # about it): the pessimistic time adds only the room the user allowed (``estimate_error``).
            left_s = max(0.0, self.work_total_s - self.running_s)
            if pessimistic:
                left_s = estimate_room_s(left_s, None, self.times.rate.prior_spread)
            return left_s
        return None

    @property
    def measured_power_w(self) -> float | None:
        """The job's draw per job-clock second of running, from its measured steps (None before any): the
        same energy the summary prices, so a plan's grams and the summary's use one model."""
        if self.measured_running_s <= 0 or self.measured_energy_j <= 0:
            return None
        return self.measured_energy_j / self.measured_running_s

    def submit(self, now: datetime) -> None:
        """The job asks to start (once per job: a relaunch keeps the first submission)."""
        if self.submitted_at is None:
            self.submitted_at = now

    def start_step(self, now: datetime) -> None:
        """A step begins."""
        if self.first_start is None:
            self.first_start = now

    def add_step(self, started: datetime, now: datetime, energy_j: float | None) -> datetime:
        """Record a step from ``started`` to ``now``; when run-now would have run it (the counterfactual)."""
        duration_s = max(0.0, (now - started).total_seconds())
        self.times.add(duration_s)
        self.last_step_s, self.last_step_energy_j = duration_s, energy_j
        if energy_j is not None and energy_j > 0:
            self.measured_energy_j += energy_j
            self.measured_running_s += duration_s
        counterfactual_at = (self.submitted_at or started) + timedelta(seconds=self.running_s)
        self.running_s += duration_s
        self.steps_done += 1
        if self.finished_at is None and self.finished:
            self.finished_at = now
        return counterfactual_at

    def note_probe(self, step_s: float | None) -> None:
        """A step time the rate probe measured while the job waits (ignored when it had none)."""
        if isinstance(step_s, int | float):
            self.times.note_probe(float(step_s))

    def restart(self) -> None:
        """After a wait: the next step is a warm-up (not counted in the step statistics)."""
        self.times.restart()

    def continue_at(self, steps_done: int) -> None:
        """The same process trains again from ``steps_done`` (a framework resumed from its checkpoint)."""
        self.steps_done = int(steps_done)

    def restore(self, *, running_s: float, first_start: datetime | None, submitted_at: datetime | None,
                measured: tuple[float, float] = (0.0, 0.0)) -> None:
        """Carry an earlier process's time axis (and its measured steps' energy and time) into this one."""
        self.running_s = running_s
        self.measured_energy_j, self.measured_running_s = measured
        self.first_start = first_start
        self.submitted_at = submitted_at
