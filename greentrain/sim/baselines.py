"""Reference schedules under the simulator's model, all with perfect knowledge of the trace.

* ``run_now``: start at once, full speed, never pause.
* ``best_window``: the best single contiguous run at full speed that ends by
  the deadline (the most a start-time-only scheduler could get).
* ``oracle``: the minimum-emission schedule over pause and every mode, by the
  same DP the policies use, fed the actual intensities, with the same waiting
  cost (idle-aware: it pauses only where the pause pays for the held draw).
  For an elastic job this is ``timing_only``: the best timing at its fixed
  count N.
* ``scaling_oracle``: an elastic job's minimum-emission replica count per
  interval (pause included), every change paying the restart overhead, by the
  scaling DP fed the actual intensities.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from greentrain.policies.slot_planner import FRESH, Slot, StartState, plan_scaling, plan_schedule
from greentrain.sim.job import SimJob
from greentrain.sim.ledger import Ledger
from greentrain.sim.noise import RateProfile
from greentrain.sim.replay import TraceIndex

__all__ = ["best_window", "oracle", "run_now", "scaling_oracle", "timing_only"]


def run_now(trace: TraceIndex, start: datetime, job: SimJob, rates: RateProfile | None = None) -> Ledger:
    """Start at ``start`` and run flat out until done (or the trace ends), at the realised ``rates``."""
    ledger = Ledger(job, rates=rates, origin=start)
    for point in trace.points[trace.index(start):]:
        if ledger.done:
            break
        ledger.step(point, job.full)
    return ledger


def best_window(trace: TraceIndex, start: datetime, job: SimJob,
                rates: RateProfile | None = None) -> tuple[Ledger, datetime]:
    """The contiguous full-speed run ending by the deadline with least emissions (else run-now)."""
    first = trace.index(start)
    deadline = start + timedelta(seconds=job.deadline_s)
    best: tuple[Ledger, datetime] | None = None
    fastest = max(rates.rates) if rates is not None else 1.0
    for offset in range(first, len(trace.points)):
        begin = trace.points[offset].start
        if begin + timedelta(seconds=job.work_s / (job.full.speed * fastest)) > deadline:
            break
        ledger = Ledger(job, rates=rates, origin=start)
        for point in trace.points[offset:]:
            if ledger.done:
                break
            ledger.step(point, job.full)
        in_time = ledger.finished_at is not None and ledger.finished_at <= deadline
        if in_time and (best is None or ledger.emissions_g < best[0].emissions_g - 1e-12):
            best = (ledger, begin)
    return best if best is not None else (run_now(trace, start, job, rates), start)


def _slots(trace: TraceIndex, start: datetime, job: SimJob) -> list[Slot]:
    """The actual intensities from ``start`` to the deadline, one slot per trace interval."""
    deadline = start + timedelta(seconds=job.deadline_s)
    slots = []
    for point in trace.points[trace.index(start):]:
        if point.start >= deadline:
            break
        slots.append(Slot(point.start, min(point.end, deadline), point.intensity_g_per_kwh))
    return slots


def oracle(trace: TraceIndex, start: datetime, job: SimJob, max_bins: int = 4000,
           rates: RateProfile | None = None) -> Ledger:
    """The perfect-foresight optimum over pause and every mode (run-now if the deadline is impossible),
    knowing the realised ``rates`` too.

    An interval of length L at rate r does the work of r·L at full speed for the energy of r·L (the same
    work costs the same energy, ``Ledger.step``): the DP sees it as a slot of length r·L at intensity I.
    Waiting through it is then planned at r·L instead of L (the ledger charges L; waiting draws about a
    tenth of running, so the plan is near-optimal, not exact). Its resume overhead is counted at the
    fastest rate (never under-planned).
    """
    first = trace.index(start)
    deadline = start + timedelta(seconds=job.deadline_s)
    probe = Ledger(job, rates=rates, origin=start)
    slots, cursor, fastest = [], start, 1.0
    for point in trace.points[first:]:
        if point.start >= deadline:
            break
        end = min(point.end, deadline)
        rate = probe.rate_over(point.start, end)
        fastest = max(fastest, rate)
        length_s = (end - point.start).total_seconds() * rate
        slots.append(Slot(cursor, cursor + timedelta(seconds=length_s), point.intensity_g_per_kwh))
        cursor = slots[-1].end
    plan = plan_schedule(slots, job.work_s, job.modes, overhead_s=job.resume_overhead_s * fastest,
                         overhead_power_w=job.full.power_w, state=StartState.FRESH, max_bins=max_bins,
                         waiting_power_w=job.waiting_power_w)
    if plan is None:
        return run_now(trace, start, job, rates)
    ledger = Ledger(job, rates=rates, origin=start)
    for point, mode in zip(trace.points[first:], plan.modes):
        ledger.step(point, mode)
    return ledger


def timing_only(trace: TraceIndex, start: datetime, job: SimJob, max_bins: int = 4000) -> Ledger:
    """The best timing at the job's fixed count (``modes[0]``): what pausing alone could reach."""
    return oracle(trace, start, job, max_bins)


def scaling_oracle(trace: TraceIndex, start: datetime, job: SimJob, max_bins: int = 6000) -> Ledger:
    """An elastic job's perfect-foresight optimum over pause and every allowed replica count, each change
    paying the restart overhead (run-now if the deadline is impossible)."""
    first = trace.index(start)
    options = job.replica_modes()
    if not options:
        raise ValueError("scaling_oracle: the job has no scaling profile")
    plan = plan_scaling(_slots(trace, start, job), job.work_s, options, overhead_s=job.resume_overhead_s,
                        state=FRESH, waiting_power_w=job.waiting_power_w, max_bins=max_bins)
    if plan is None:
        return run_now(trace, start, job)
    ledger = Ledger(job)
    for point, mode in zip(trace.points[first:], plan.modes):
        ledger.step(point, mode)
    return ledger
