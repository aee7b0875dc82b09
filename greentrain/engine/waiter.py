"""Blocking waits for a delayed start or a pause, with APScheduler wake-ups and re-plans.

Rank 0 owns an APScheduler ``BackgroundScheduler`` with two jobs: a one-shot
wake-up at the planned resume time and a periodic re-plan that reads fresh
carbon data, asks the policy again and moves the resume time (earlier when
the forecast improved or the deadline guard demands it). Times are on the job
clock and converted to wall time through ``clock.speedup``, so a
``ReplayClock`` trace plays through a day of pauses in seconds.

Every rank loops in bounded chunks and, after each chunk, takes part in one
broadcast of rank 0's (target, done) pair, so all ranks leave the wait at
the same iteration — never a rank stepping into a collective alone.
"""

from __future__ import annotations

import logging
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from greentrain.jobstats import JobState

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["Waiter"]

log = logging.getLogger("greentrain.waiter")

_MIN_REPLAN_REAL_S = 0.05


class Waiter:
    """Waits on behalf of an EngineCore; one instance per engine, one wait at a time."""

    def __init__(self, engine: EngineCore, *, progress: bool = True, sync_real_s: float = 30.0,
                 tick_real_s: float = 0.25) -> None:
        self.engine = engine
        self.progress = progress
        self.sync_real_s = sync_real_s
        """Longest real time between rank agreements (keeps collectives far from their timeouts)."""
        self.tick_real_s = tick_real_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._replan_lock = threading.Lock()
        self._target: datetime | None = None
        self._pause_from: tuple[datetime, float | None] | None = None
        self._scheduler: Any = None
        self.replans = 0
        """Number of re-plans that moved the resume time (for tests and the log)."""

    # ---- public -----------------------------------------------------------------------------------

    def wait(self, when: datetime | None, reason: str = "") -> bool:
        """Block until it is time to run; True if interrupted. Collective on multi-rank jobs."""
        engine, clock = self.engine, self.engine.clock
        started = clock.now()
        energy_before_j = self._energy_j()
        self._pause_from = (started, energy_before_j)
        self._stop.clear()
        leader = engine.is_leader
        if leader:
            with self._lock:
                self._target = self._clamp(when, started)
            self._schedule()
            self._announce(reason)
            engine.waiting.announce()
        interrupted = False
        try:
            with _Countdown(self, reason, enabled=leader and self.progress) as countdown:
                interrupted = self._loop(countdown)
        finally:
            self._unschedule()
            # The scheduler lives only as long as a wait: an engine its owner never closes must not
            # leave a thread behind (a forked child would inherit its locks).
            self._stop_scheduler(wait=True)
        self._account_idle(started, energy_before_j)
        engine.mark_running(clock.now())
        return interrupted

    def interrupt(self) -> None:
        """Make the current wait return at once (thread- and signal-handler-safe)."""
        self._stop.set()
        self._wake.set()

    @property
    def target(self) -> datetime | None:
        """The resume time currently planned (rank 0)."""
        with self._lock:
            return self._target

    def shutdown(self) -> None:
        """Stop the scheduler thread (engine.close)."""
        self._stop_scheduler(wait=False)

    def _stop_scheduler(self, wait: bool) -> None:
        # Detached under _lock, which _schedule_wake holds across add_job: APScheduler deadlocks when
        # a job calls add_job during shutdown(wait=True) (shutdown holds the executors lock while it
        # joins the job's thread, its loop holds the job-store lock waiting for the executors lock,
        # and add_job waits for the job-store lock). So a re-plan job adds its job before the
        # shutdown starts, or finds no scheduler.
        with self._lock:
            scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=wait)

    # ---- loop -------------------------------------------------------------------------------------

    def _loop(self, countdown: _Countdown) -> bool:
        engine, clock = self.engine, self.engine.clock
        if engine.broadcast.world_size > 1:
            chunk_real_s = self.sync_real_s
        else:  # one process: wake-ups cut the sleep short, chunks only refresh the countdown
            chunk_real_s = self.tick_real_s if countdown.enabled else float("inf")
        while True:
            self._wake.clear()  # before reading the target: a re-plan after this point still wakes us
            payload = None
            if engine.is_leader:
                now, stopped = clock.now(), self._stop.is_set()
                if not stopped and now >= self.target:
                    self._replan(at_wake=True)  # the planned time is a re-plan point: still paused?
                target = self.target
                payload = (target, stopped or clock.now() >= target, stopped)
            target, done, interrupted = engine.broadcast.share(payload)
            if done:
                return bool(interrupted)
            remaining_s = (target - clock.now()).total_seconds()
            clock.sleep(max(0.0, min(remaining_s, chunk_real_s * clock.speedup)), stop=self._wake)
            countdown.update()

    def _clamp(self, when: datetime | None, now: datetime) -> datetime:
        """The requested time, moved up to the deadline guard's latest safe resume."""
        target = when or now + timedelta(seconds=self.engine.decide_interval_s)
        latest = self.engine.latest_safe_resume()
        if latest is not None and latest < target:
            target = max(now, latest)
            self.engine.guard_engaged = True
        return target

    # ---- APScheduler jobs (rank 0) ----------------------------------------------------------------

    def _schedule(self) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.interval import IntervalTrigger

        if self._scheduler is None:
            self._scheduler = BackgroundScheduler(timezone=UTC, daemon=True)
            self._scheduler.start()
        replan_real_s = max(_MIN_REPLAN_REAL_S, self.engine.decide_interval_s / self.engine.clock.speedup)
        self._scheduler.add_job(self._replan, IntervalTrigger(seconds=replan_real_s, timezone=UTC),
                                id="greentrain-replan", replace_existing=True, max_instances=1, coalesce=True)
        self._schedule_wake()

    def _schedule_wake(self) -> None:
        from apscheduler.triggers.date import DateTrigger

        with self._lock:  # held across add_job: the scheduler cannot shut down in between (_stop_scheduler)
            target, scheduler = self._target, self._scheduler
            if scheduler is None or target is None:
                return
            clock = self.engine.clock
            delay_real_s = max(0.0, (target - clock.now()).total_seconds() / clock.speedup)
            run_at = datetime.now(UTC) + timedelta(seconds=min(delay_real_s, 10 * 365 * 86400.0))
            scheduler.add_job(self._wake.set, DateTrigger(run_date=run_at, timezone=UTC),
                              id="greentrain-wake", replace_existing=True, misfire_grace_time=None)

    def _unschedule(self) -> None:
        if self._scheduler is None:
            return
        for job_id in ("greentrain-replan", "greentrain-wake"):
            try:
                self._scheduler.remove_job(job_id)
            except Exception:  # JobLookupError: already fired
                pass

    def _replan(self, at_wake: bool = False) -> None:
        """Re-decide with fresh data; move the resume time if the plan changed.

        On the scheduler's ticks (forecast changes) and at the planned time
        itself (``at_wake``): policies that re-plan per interval return a pause
        that ends at the interval's end, and waking then must not cost a step.
        """
        engine = self.engine
        with self._replan_lock:
            now = engine.clock.now()
            self._measure_waiting(now, final=False)  # the re-plan sees the draw measured so far
            try:
                new_target = engine.replan_paused(now, force=at_wake)
            except Exception as e:  # never let the scheduler thread die silently
                engine.note(f"re-plan failed ({type(e).__name__}: {e}); keeping the current plan")
                return
            if new_target is None:  # same data as the last decision: keep the plan
                new_target = self.target
            latest = engine.latest_safe_resume()
            if latest is not None and new_target is not None and latest < new_target:
                engine.guard_engaged = True
            candidates = [t for t in (new_target, latest) if t is not None]
            if not candidates:
                return
            new_target = max(now, min(candidates))
            with self._lock:
                old = self._target
                if old is None or abs((new_target - old).total_seconds()) < 1e-6:
                    return
                self._target = new_target
        if not at_wake or new_target > now:
            self.replans += 1
            engine.event("action", action="replan", reason="re-planned during the pause", until=new_target,
                          previous_until=old)
        self._schedule_wake()
        if new_target < old:
            self._wake.set()

    # ---- accounting and display -------------------------------------------------------------------

    def _energy_j(self) -> float | None:
        """Energy of the devices a pause holds (``Monitor.held_energy_j``: the GPUs), else the whole total."""
        monitor = self.engine.monitor
        read = getattr(monitor, "held_energy_j", None) or getattr(monitor, "total_energy_j", None)
        if read is None:
            return None
        try:
            return float(read())
        except Exception:
            return None

    def _measure_waiting(self, now: datetime, *, final: bool, energy_now_j: float | None = None) -> None:
        """Feed the held devices' draw over this pause so far to ``engine.waiting``."""
        if self._pause_from is None or self.engine.monitor is None:
            return
        started, before_j = self._pause_from
        after_j = energy_now_j if final else self._energy_j()
        energy_j = None if after_j is None or before_j is None else max(0.0, after_j - before_j)
        real_s = (now - started).total_seconds() / self.engine.clock.speedup  # energy is in real joules
        self.engine.waiting.observe_pause(energy_j, real_s, final=final)

    def _account_idle(self, started: datetime, energy_before_j: float | None) -> None:
        """Idle draw during the wait is real: price it, and run-now would not have spent it."""
        energy_after_j = self._energy_j()
        self._measure_waiting(self.engine.clock.now(), final=True, energy_now_j=energy_after_j)
        self._pause_from = None
        engine = self.engine
        now = engine.clock.now()
        if engine.waiting.released:  # the devices were given back: only a user's figure is charged
            if engine.waiting.user_w is None:
                return
            idle_j = engine.waiting.user_w * (now - started).total_seconds() / engine.clock.speedup
        elif energy_before_j is None or energy_after_j is None:
            return
        else:
            idle_j = max(0.0, energy_after_j - energy_before_j)
        entry = engine.ledger.record(idle_j, started + (now - started) / 2, None)
        engine.job_stats.add(energy_j=entry.energy_j, emissions_g=entry.emissions_g,
                             emissions_avoided_g=entry.avoided_g)
        engine.mark_unpriced(entry)
        engine.job_stats.update(waiting_energy_j=engine.job_stats.waiting_energy_j + entry.energy_j,
                                waiting_power_w=engine.waiting.value_w)

    def planned_resume(self) -> datetime | None:
        """The one time people are told: the plan's resume (not the policy's next look), guard-clamped."""
        from greentrain.engine.decider import planned_resume

        engine, target = self.engine, self.target
        if target is None:
            return None
        resume = planned_resume(engine.decision, engine.clock.now()) or target
        latest = engine.latest_safe_resume()
        if latest is not None and latest < resume:
            resume = max(target, latest)
        return max(resume, target)

    def _announce(self, reason: str) -> None:
        engine = self.engine
        what = "delaying start" if engine.state == JobState.WAITING else "paused"
        # One time per message: the resume. The deadline is on the plan line and the countdown.
        from greentrain.units import format_time

        until = format_time(self.planned_resume(), simulated=engine.deadline_watch.simulated)
        message = f"greentrain: {what} until {until}{f' ({reason})' if reason else ''}"
        log.debug(message)
        if not (self.progress and sys.stderr.isatty()):  # on a terminal the countdown says it
            print(message, file=sys.stderr, flush=True)


class _Countdown:
    """A rich progress bar showing the planned window; a no-op when disabled or not on a terminal."""

    def __init__(self, waiter: Waiter, reason: str, *, enabled: bool) -> None:
        self.waiter = waiter
        self.reason = reason
        self.enabled = enabled and sys.stderr.isatty()
        self._progress: Any = None
        self._task: Any = None
        self._start = waiter.engine.clock.now()

    def __enter__(self) -> _Countdown:
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[left]}"),
                                  console=Console(stderr=True), transient=True)
        self._progress.start()
        self._task = self._progress.add_task(self._describe(), total=1.0, left="")
        return self

    def update(self) -> None:
        if self._progress is None:
            return
        clock = self.waiter.engine.clock
        target = self.waiter.target or clock.now()
        total_s = max(1e-9, (target - self._start).total_seconds())
        left_s = max(0.0, (target - clock.now()).total_seconds())
        self._progress.update(self._task, completed=1.0 - left_s / total_s, description=self._describe(),
                              left=f"{_hms(left_s)} left")

    def _describe(self) -> str:
        window = f"run from {_fmt(self.waiter.planned_resume())}"
        deadline = self.waiter.engine.deadline
        if deadline is not None:
            window += f" to finish by {_fmt(deadline)}"
        return f"waiting: {window}" + (f" — {self.reason}" if self.reason else "")

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _fmt(value: datetime | None) -> str:
    from greentrain.units import format_time

    return format_time(value)


def _hms(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s"
