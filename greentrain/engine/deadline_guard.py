"""The deadline guard: the engine's own guarantee, independent of the policy.

A policy plans pauses from the measured step time; if steps then run slower
than planned, the plan slips. The guard recomputes, from a pessimistic step
time, the latest moment the job can (re)start and still finish by the
deadline, and the engine never waits past it. ``DeadlineGuard`` owns the
job's deadline and what the guard has concluded (best-effort from the start,
engaged for good once it had to cut a pause short), and the watch that says
when a miss becomes likely. The arithmetic is pure functions of their
arguments, so it is tested without clocks.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from greentrain.engine.deadlinewatch import DeadlineVerdict, DeadlineWatch
from greentrain.engine.progress import Progress
from greentrain.policies.base import Action, Decision
from greentrain.policies.settings import PolicySettings
from greentrain.units import format_duration_s, format_time

__all__ = ["SAFETY_FRAC", "DeadlineGuard", "latest_safe_resume", "must_run_now", "infeasibility"]

SAFETY_FRAC = 0.05
"""Extra fraction of remaining work kept in hand while the work is only estimated (the user's figure, or
steps not yet measured long enough): measured steps bring their own spread."""


def latest_safe_resume(
    deadline: datetime,
    work_remaining_s: float,
    *,
    resume_overhead_s: float = 0.0,
    margin_s: float = 0.0,
    safety_frac: float = SAFETY_FRAC,
) -> datetime:
    """Latest (re)start time that still finishes ``work_remaining_s`` (pessimistic) before ``deadline``."""
    needed_s = max(0.0, work_remaining_s) * (1.0 + safety_frac) + max(0.0, resume_overhead_s) + max(0.0, margin_s)
    return deadline - timedelta(seconds=needed_s)


def must_run_now(now: datetime, latest_resume: datetime, next_step_s: float) -> bool:
    """Whether pausing now, even for one step's length, would cross the latest safe resume."""
    return now + timedelta(seconds=max(0.0, next_step_s)) >= latest_resume


def infeasibility(deadline: datetime, now: datetime, work_remaining_s: float | None) -> str | None:
    """Why the job cannot meet ``deadline`` from ``now`` (in the past, or shorter than the remaining work,
    naming both and the fix); None when it can."""
    if deadline <= now:
        return (f"deadline {format_time(deadline)} is in the past (by "
                f"{format_duration_s((now - deadline).total_seconds())}); give a later --deadline")
    if work_remaining_s is None:
        return None
    available_s = (deadline - now).total_seconds()
    if work_remaining_s > available_s:
        return (f"deadline {format_time(deadline)} leaves {format_duration_s(available_s)} but the remaining work "
                f"needs {format_duration_s(work_remaining_s)}; give a later --deadline or use --deadline-policy "
                "best-effort")
    return None


def _iso(value: datetime | None) -> str:
    return value.isoformat().replace("+00:00", "Z") if value is not None else "-"


class DeadlineGuard:
    """One job's deadline, the guard over its pauses and the watch over its pace.

    Args:
        at: aware UTC datetime by which the job must finish (None: no deadline, the guard does nothing).
        policy: 'strict' (an impossible deadline is refused at the start; a late finish exits 3) or
            'best-effort' (said, then the job runs now).
        resume_overhead_s: time lost per resume, kept in hand before the deadline.
        simulated: the job clock is not wall time (messages say so).
        speedup: job-clock seconds per real second (step times are said in real seconds).
    """

    def __init__(self, at: datetime | None = None, *, policy: str = "strict", resume_overhead_s: float = 0.0,
                 simulated: bool = False, speedup: float = 1.0) -> None:
        self.at = at
        self.policy = policy
        self.resume_overhead_s = resume_overhead_s
        self.best_effort = False
        """Set at the start when the deadline cannot be met under 'best-effort': the job runs now, to the end."""
        self.engaged = False
        """Set once the guard cut a pause short: from then on the job runs to the end (the schedule is tight;
        more pauses would only chop the remaining run into slivers)."""
        self.watch = DeadlineWatch(at, simulated=simulated, speedup=speedup)
        """Warns once on stderr when the measured rate says the deadline will be missed (rank 0)."""
        self.verdict: DeadlineVerdict | None = None
        """Met or missed, set by ``judge`` at the end (None without a deadline)."""

    @classmethod
    def for_policy(cls, at: datetime | None, settings: PolicySettings, *, policy: str | None = None,
                   simulated: bool = False, speedup: float = 1.0) -> DeadlineGuard:
        """The guard of a job under a policy with ``settings`` (``policy`` overrides its deadline policy)."""
        return cls(at, policy=policy or settings.deadline_policy, resume_overhead_s=settings.resume_overhead_s or 0.0,
                   simulated=simulated, speedup=speedup)

    def latest_safe_resume(self, progress: Progress) -> datetime | None:
        """Latest (re)start that meets the deadline at the pessimistic step time (None: no deadline)."""
        work_s = progress.work_remaining_s(pessimistic=True)
        if self.at is None or work_s is None:
            return None
        margin_s = progress.times.pessimistic_s or 0.0
        # Measured steps carry their own spread (a pessimistic quantile); the fixed fraction is for estimates.
        safety = 0.0 if progress.steps_total is not None and progress.times.rate.stable else SAFETY_FRAC
        return latest_safe_resume(self.at, work_s, resume_overhead_s=self.resume_overhead_s, margin_s=margin_s,
                                  safety_frac=safety)

    def check_start(self, now: datetime, work_remaining_s: float | None) -> tuple[str | None, str | None]:
        """The deadline's one feasibility check, at the start: (error refusing the job, note saying it runs
        best-effort instead); both None when the deadline can be met."""
        problem = infeasibility(self.at, now, work_remaining_s) if self.at is not None else None
        if problem is None:
            return None, None
        if self.policy != "best-effort":
            return problem, None
        self.best_effort = True
        self.watch.warned = True  # the note is the warning; say it once
        return None, f"{problem.split('; give a later')[0]}; best-effort: running now"  # the fix is not wanted

    def restore(self, *, warned: bool) -> None:
        """An earlier process of the job already said the deadline will be missed (``warned``): not again."""
        self.watch.warned = self.watch.warned or warned

    def engage(self) -> None:
        """A pause was cut short to meet the deadline: the job runs to the end from now on."""
        self.engaged = True

    def clamp(self, decision: Decision, now: datetime, progress: Progress, default_wait_s: float) -> Decision:
        """Clamp a pause to the latest safe resume; refuse a pause the deadline cannot afford."""
        if decision.action == Action.RUN:
            if decision.to_the_end and self.at is not None:
                self.engaged = True  # 'no slack; running flat out' stays true: no pause after it
            return decision
        latest = self.latest_safe_resume(progress)
        until = decision.until or (now + timedelta(seconds=default_wait_s))
        if latest is not None:
            if self.engaged or must_run_now(now, latest, progress.times.pessimistic_s or 0.0):
                self.engaged = True
                return replace(decision, action=Action.RUN, until=None,
                               reason=f"deadline guard: must run to finish by {_iso(self.at)}")
            if until > latest:
                until = latest
                decision = replace(decision, reason=f"{decision.reason} (resume moved up by the deadline guard)")
        return replace(decision, until=until)

    def judge(self, finished_at: datetime | None) -> DeadlineVerdict | None:
        """The end against the deadline (``finished_at`` None: not finished); kept in ``verdict``."""
        self.verdict = self.watch.verdict(finished_at)
        return self.verdict

    @property
    def missed(self) -> bool:
        """The job finished after its deadline (known after ``judge``)."""
        verdict = self.verdict
        return verdict is not None and verdict.finished_at is not None and not verdict.met
