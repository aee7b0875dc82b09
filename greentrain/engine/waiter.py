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
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from greentrain.engine.countdown import Countdown
from greentrain.engine.idle_charge import charge_idle, held_energy_j, observe_pause
from greentrain.engine.interrupt_relay import InterruptRelay
from greentrain.engine.resumenotice import MOVE_MIN_S, ResumeNotice, kept_resume
from greentrain.jobstats import JobState
from greentrain.policies.base import Action

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

    from greentrain.engine.core import EngineCore

__all__ = ["Waiter"]

log = logging.getLogger("greentrain.waiter")

_MIN_REPLAN_REAL_S = 0.05


class Waiter:
    """Waits on behalf of an EngineCore; one instance per engine, one wait at a time.

    ``scheduler_factory`` builds the APScheduler ``BackgroundScheduler`` of a wait (rank 0; a test may give
    a double). A wait runs in three phases, each public: ``open_scheduler``, ``retarget`` (what every
    re-plan does) and ``close_scheduler``.
    """

    def __init__(self, engine: EngineCore, *, countdown: bool = True, sync_real_s: float = 30.0,
                 tick_real_s: float = 0.25, scheduler_factory: Callable[[], BackgroundScheduler] | None = None) -> None:
        self.engine = engine
        self.countdown = countdown
        """A rich countdown on a terminal while waiting (rank 0)."""
        self.sync_real_s = sync_real_s
        """Longest real time between rank agreements (keeps collectives far from their timeouts)."""
        self.tick_real_s = tick_real_s
        self._new_scheduler = scheduler_factory or _background_scheduler
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._interrupts = InterruptRelay(self._stop, self._wake)
        self._lock = threading.Lock()
        self._replan_lock = threading.Lock()
        self._target: datetime | None = None
        self._scheduler: BackgroundScheduler | None = None
        self.replans = 0
        """Number of re-plans that moved the resume time (for tests and the log)."""
        self.notice = ResumeNotice(say=self._say, log_until=self._log_until, fmt=self._fmt)
        """The one resume time people are told for the current wait (``engine/resumenotice.py``; rank 0)."""
        self._logged_resume: datetime | None = None

    # ---- public -----------------------------------------------------------------------------------

    def wait(self, when: datetime | None, reason: str = "") -> bool:
        """Block until it is time to run; True if interrupted. Collective on multi-rank jobs."""
        engine, clock = self.engine, self.engine.clock
        started = clock.now()
        engine.pause_cost.begin_pause(started, held_energy_j(self.engine))
        self._stop.clear()
        leader = engine.is_leader
        interrupted = ctrl_c = False
        try:
            with self._interrupts:  # Ctrl-C under Python's own handler ends the wait here, never mid-lock
                if leader:
                    with self._lock:
                        self._target = self._clamp(when, started)
                    self.open_scheduler()
                    self.announce(reason)
                    engine.log_pause_cost()
                with Countdown(self, engine.clock, engine.deadline.at, reason,
                               enabled=leader and self.countdown) as countdown:
                    interrupted = self._loop(countdown)
            ctrl_c = self._interrupts.ctrl_c
        except KeyboardInterrupt:  # Ctrl-C under another handler that raises it: one line, not a traceback
            interrupted = ctrl_c = True
        finally:
            self._unschedule()
            # The scheduler lives only as long as a wait: an engine its owner never closes must not
            # leave a thread behind (a forked child would inherit its locks).
            self.close_scheduler(wait=True)
        charge_idle(self.engine)
        if leader:  # a line only when the wait ended well before the time announced
            self.notice.close(clock.now(), self._why_now(), interrupted=interrupted)
        engine.mark_running(clock.now())
        if ctrl_c:
            self._stop_on_ctrl_c()
        return interrupted

    def _stop_on_ctrl_c(self) -> None:
        """Ctrl-C ended the wait (its scheduler is closed, its idle draw charged): ``Interrupted``, status 130.

        The driver says the one line (``Session``, the CLI); a loop's own ``except KeyboardInterrupt`` still
        catches it, and uncaught it ends the program quietly, never with a traceback from inside the wait."""
        from greentrain.errors import Interrupted
        from greentrain.exitcodes import INTERRUPTED_EXIT_CODE

        self.engine.event("interrupted", during="wait")
        raise Interrupted(INTERRUPTED_EXIT_CODE)

    def interrupt(self) -> None:
        """Make the current wait return at once (thread- and signal-handler-safe: takes no lock)."""
        self._interrupts.request()

    @property
    def target(self) -> datetime | None:
        """The resume time currently planned (rank 0)."""
        with self._lock:
            return self._target

    def open_scheduler(self) -> None:
        """A wait begins (rank 0): start the scheduler with its periodic re-plan and the wake-up."""
        from apscheduler.triggers.interval import IntervalTrigger

        with self._lock:
            if self._scheduler is None:
                self._scheduler = self._new_scheduler()
                self._scheduler.start()
            scheduler = self._scheduler
        engine = self.engine
        replan_real_s = max(_MIN_REPLAN_REAL_S, engine.decide_interval_s / engine.clock.speedup)
        scheduler.add_job(self._replan, IntervalTrigger(seconds=replan_real_s, timezone=UTC),
                          id="greentrain-replan", replace_existing=True, max_instances=1, coalesce=True)
        self._schedule_wake()

    def retarget(self, when: datetime) -> None:
        """Move the planned resume to ``when`` and the wake-up with it (a re-plan; also before a wait)."""
        with self._lock:
            self._target = when
        self._schedule_wake()

    def close_scheduler(self, wait: bool = False) -> None:
        """Stop the scheduler thread (the end of a wait, with ``wait``; ``engine.close`` without)."""
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

    def _loop(self, countdown: Countdown) -> bool:
        engine, clock = self.engine, self.engine.clock
        broadcast = engine.io.broadcast
        if broadcast.world_size > 1:
            chunk_real_s = self.sync_real_s
        else:  # one process: wake-ups cut the sleep short, chunks only refresh the countdown
            chunk_real_s = self.tick_real_s if countdown.enabled else float("inf")
        while True:
            self._wake.clear()  # before reading the target: a re-plan after this point still wakes us
            payload = None
            if engine.is_leader:
                now, stopped = clock.now(), self._stop.is_set()
                target = self.target
                if not stopped and target is not None and now >= target:
                    self._replan(at_wake=True)  # the planned time is a re-plan point: still paused?
                target = self.target
                payload = (target, stopped or target is None or clock.now() >= target, stopped)
            target, done, interrupted = broadcast.share(payload)
            if done or target is None:  # the leader says done whenever it has no target
                return bool(interrupted)
            if engine.is_leader:  # the announced time has come and the job waits on: one line with the new time
                self.notice.check(clock.now(), self.planned_resume(), engine.last_decision().reason)
            announced = self.notice.announced if engine.is_leader else None
            if announced is not None and clock.now() < announced < target:
                target = announced  # wake then to say whether the job resumes as announced
            remaining_s = (target - clock.now()).total_seconds()
            clock.sleep(max(0.0, min(remaining_s, chunk_real_s * clock.speedup)), stop=self._wake)
            countdown.update()

    def _clamp(self, when: datetime | None, now: datetime) -> datetime:
        """The requested time, moved up to the deadline guard's latest safe resume."""
        engine = self.engine
        target = when or now + timedelta(seconds=engine.decide_interval_s)
        latest = engine.deadline.latest_safe_resume(engine.progress)
        if latest is not None and latest < target:
            target = max(now, latest)
            engine.deadline.engage()
        return target

    # ---- APScheduler jobs (rank 0) ----------------------------------------------------------------

    def _schedule_wake(self) -> None:
        from apscheduler.triggers.date import DateTrigger

        with self._lock:  # held across add_job: the scheduler cannot shut down in between (close_scheduler)
            target, scheduler = self._target, self._scheduler
            if scheduler is None or target is None:
                return
            clock = self.engine.clock
            delay_real_s = max(0.0, (target - clock.now()).total_seconds() / clock.speedup)
            run_at = datetime.now(UTC) + timedelta(seconds=min(delay_real_s, 10 * 365 * 86400.0))
            scheduler.add_job(self._wake.set, DateTrigger(run_date=run_at, timezone=UTC),
                              id="greentrain-wake", replace_existing=True, misfire_grace_time=None)

    def _unschedule(self) -> None:
        scheduler = self._scheduler
        if scheduler is None:
            return
        for job_id in ("greentrain-replan", "greentrain-wake"):
            try:
                scheduler.remove_job(job_id)
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
            observe_pause(self.engine, now, final=False)  # the re-plan sees the draw measured so far
            try:
                new_target = engine.replan_paused(now, force=at_wake)
            except Exception as e:  # never let the scheduler thread die silently
                engine.note(f"re-plan failed ({type(e).__name__}: {e}); keeping the current plan")
                return
            if new_target is None:  # same data as the last decision: keep the plan
                new_target = self.target
            latest = engine.deadline.latest_safe_resume(engine.progress)
            if latest is not None and new_target is not None and latest < new_target:
                engine.deadline.engage()
            candidates = [t for t in (new_target, latest) if t is not None]
            if not candidates:
                return
            new_target = max(now, min(candidates))
            with self._lock:
                old = self._target
                if old is None or abs((new_target - old).total_seconds()) < 1e-6:
                    return
        if not at_wake or new_target > now:
            self.replans += 1
        self.retarget(new_target)
        self._log_move(now)
        if new_target < old:
            self._wake.set()

    def _log_move(self, now: datetime) -> None:
        """A ``replan`` event when the resume (not only the next look) moved: the run log's ``until`` is the
        same kept resume the terminal and the summary give; ``next_look`` is when the policy looks again."""
        before, after = self._logged_resume, self.planned_resume()
        if after is None or (before is not None and abs((after - before).total_seconds()) < MOVE_MIN_S):
            return
        self._logged_resume = after
        self.engine.event("action", action="replan", reason=self.engine.last_decision().reason or "re-planned",
                          until=after, previous_until=before, next_look=self.target)

    def _why_now(self) -> str:
        """Why the wait ended before the time announced: the decision that runs, else the guard or a re-plan."""
        engine = self.engine
        decision = engine.last_decision()
        if decision.action not in (Action.PAUSE, Action.DELAY_START) and decision.reason:
            return decision.reason
        return "the deadline guard" if engine.deadline.engaged else "re-planned"

    def _say(self, line: str) -> None:
        log.debug(line)
        print(line, file=sys.stderr, flush=True)

    def _fmt(self, when: datetime) -> str:
        from greentrain.units import format_time

        return format_time(when, simulated=self.engine.clock.simulated)

    def _log_until(self, now: datetime, resume: datetime) -> None:
        """The run log's ``state`` event says the time the terminal just said."""
        engine = self.engine
        self._logged_resume = resume
        state = JobState.WAITING if engine.progress.first_start is None else JobState.PAUSED
        engine.set_state(state, now, until=resume)

    def planned_resume(self) -> datetime | None:
        """The one time people are told: the plan's resume (not the policy's next look), guard-clamped
        (``kept_resume``), never before the wait's target."""
        engine, target = self.engine, self.target
        if target is None:
            return None
        latest = engine.deadline.latest_safe_resume(engine.progress)
        resume = kept_resume(engine.last_decision(), engine.clock.now(), latest)  # None: the wait ends at the target
        return target if resume is None else max(resume, target)

    @property
    def announced(self) -> datetime | None:
        """The resume time the terminal was last told (rank 0; None outside a wait)."""
        return self.notice.announced

    def announce(self, reason: str) -> None:
        """Say the wait on stderr once (``delaying start``/``paused`` until the planned resume), unless the
        countdown shows it on a terminal; the run log's ``state`` event gives the same time."""
        engine = self.engine
        # A job under way that waits (a relaunch's first wait included) is paused, not delaying its start.
        what = "delaying start" if engine.progress.first_start is None else "paused"
        resume = self.planned_resume()
        # One time per message: the resume. The deadline is on the plan line and the countdown.
        self.notice.open(what, resume, reason, print_line=not (self.countdown and sys.stderr.isatty()))
        if resume is not None and resume != engine.logged_until:  # the decision's own event said another time
            self._log_until(engine.clock.now(), resume)
        self._logged_resume = resume


def _background_scheduler() -> BackgroundScheduler:
    from apscheduler.schedulers.background import BackgroundScheduler

    return BackgroundScheduler(timezone=UTC, daemon=True)
