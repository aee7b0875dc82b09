"""Run the demo job: the reference model (on the GPU if there is one, else the CPU) under a live greentrain Session, on a replayed trace.

The job is cut into *segments*. A segment is one Session around one Trainer:
it may wait for a clean window before its first step, trains, and ends when
the job is done, when the policy pauses (the Session saves a checkpoint and
stops the loop), or on Ctrl-C. After a pause the engine's own waiter waits,
with its countdown and re-plans, while the exporter still serves; then a
*fresh* Trainer loads the checkpoint and the next Session resumes the same
job. This is the ``relaunch="none"`` path of ``Session``, kept in one
process so a day of trace fits in minutes (re-starting Python and torch would
cost many simulated hours at a high speed-up).

Ctrl-C: during a wait, the wait ends at once; during training, the loop stops
at the next step boundary with a checkpoint. Either way the Session restores
what it changed and writes its state, and the demo remembers the simulated
time, so ``greentrain demo --out SAME_DIR`` continues. A second Ctrl-C aborts
at once (the newest checkpoint is still there).
"""

from __future__ import annotations

import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from greentrain.demo.clock import HoldableReplayClock
from greentrain.demo.progress import StepProgress
from greentrain.demo.scenario import Scenario
from greentrain.demo.state import DemoState, save_demo_state
from greentrain.errors import ConfigError
from greentrain.job.state import STATE_FILE_NAME

if TYPE_CHECKING:
    from greentrain.events import EventLog
    from greentrain.engine.collaborators import Loss
    from greentrain.job.options import Actuation, ProviderSpec
    from greentrain.monitor import Monitor
    from greentrain.policies.base import Decision, Policy
    from greentrain.runtime.config import JobConfig
    from greentrain.runtime.metrics import StepMetrics
    from greentrain.runtime.trainer import Trainer
    from greentrain.session import Session

__all__ = ["DemoRunner", "SegmentEnd", "demo_config", "demo_device", "demo_policy", "measure_step_time_s"]

CHECKPOINT_INTERVAL = 50
"""Steps between periodic checkpoints (pauses and Ctrl-C always save)."""

DECIDE_INTERVAL_S = 900.0
"""Re-plan every 15 simulated minutes while training: the trace is hourly, and at a high speed-up each
decision's real cost (a forecast) would otherwise be scaled into hours of apparent step time."""


class SegmentEnd:
    """Why a segment ended."""

    FINISHED = "finished"
    PAUSED = "paused"
    INTERRUPTED = "interrupted"


def demo_device() -> str:
    """Where the demo trains: the first visible GPU when torch can use one, else the CPU."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def demo_config(out_dir: Path | None, steps: int) -> JobConfig:
    """The tiny preset on ``demo_device()`` for ``steps`` steps, checkpointing into ``out_dir/checkpoint``."""
    from greentrain.runtime.config import load_config

    cfg = load_config("tiny").replace("train", steps=steps, device=demo_device())
    if out_dir is not None:
        cfg = cfg.replace("checkpoint", dir=str(out_dir / "checkpoint"), interval=CHECKPOINT_INTERVAL)
    return cfg


def demo_policy(spec: str, reserve_h: float) -> Policy:
    """The policy ``spec``, keeping at least ``reserve_h`` simulated hours free before the deadline.

    Applies to policies with a ``reserve_s`` parameter (carbon-aware, forecast-optimal, ...); others are
    returned as loaded. At a high speed-up every real jitter of the step time (a busy machine) is scaled into
    simulated hours of work, which the policy cannot foresee; the reserve absorbs it.
    """
    import dataclasses

    from greentrain.policies import load_policy
    from greentrain.policies.configured import ConfiguredPolicy
    from greentrain.policies.forecast_optimal import ForecastOptimalConfig

    policy = load_policy(spec)
    config = policy.config if isinstance(policy, ConfiguredPolicy) else None
    reserve_s = reserve_h * 3600.0
    if not isinstance(config, ForecastOptimalConfig) or config.reserve_s >= reserve_s:  # the one with a reserve
        return policy
    configured: Callable[..., Policy] = type(policy)  # a policy with a Config takes (config, settings=...)
    return configured(dataclasses.replace(config, reserve_s=reserve_s), settings=policy.settings)


def measure_step_time_s(min_steps: int = 8, min_real_s: float = 2.0, max_steps: int = 64) -> float:
    """Real seconds per training step of the demo model on this machine: the mean after a warm-up step.

    Times at least ``min_steps`` steps and at least ``min_real_s`` seconds (at most ``max_steps``): a few
    steps read 17 ms on one run and 64 ms on the next on a busy machine, and the job is sized from this.
    The mean, not the median: a loaded machine's slow steps are part of what the job will take.
    """
    from greentrain.runtime.trainer import Trainer

    trainer = Trainer(demo_config(None, max_steps + 1))
    trainer.train_step()  # warm-up: allocator and caches
    times: list[float] = []
    started = time.monotonic()
    while len(times) < max_steps and (len(times) < min_steps or time.monotonic() - started < min_real_s):
        times.append(trainer.train_step().step_time_s)
    return float(statistics.fmean(times))


@dataclass(slots=True)
class _Hook:
    """The trainer's step-boundary hook: the Session decides; a Ctrl-C also stops (with a checkpoint)."""

    session: Session
    runner: DemoRunner

    @property
    def should_stop(self) -> bool:
        return bool(self.session.should_stop or self.runner.interrupted)

    def on_step_end(self, step: int, tokens: int, loss: Loss) -> Decision:
        self.runner.clock.advance(self.runner.step_job_s)  # the step's fixed share of the simulated work
        return self.session.step(tokens=tokens, loss=loss)


class DemoRunner:
    """Drives the demo job in ``out_dir`` to its end (or to a Ctrl-C). See the module docstring."""

    def __init__(self, scenario: Scenario, state: DemoState, out_dir: Path, *, metrics_port: int | None,
                 say: Callable[[str], None], progress: bool, provider: ProviderSpec | None = None,
                 actuation: Actuation | None = None, codecarbon_csv: str | Path | None = None) -> None:
        self.scenario = scenario
        self.codecarbon_csv = codecarbon_csv
        """Append a CodeCarbon-compatible row per segment here (``--codecarbon-csv``), or None."""
        self.actuation = actuation
        """'advise' for advisory mode (``--advise-only``); None: 'apply' unless GREENTRAIN_ADVISE_ONLY=1."""
        self.provider = provider if provider is not None else f"csv:{scenario.trace}"
        """Carbon source: the scenario's trace as a ``csv:`` provider spec, or a SignalChain-like object."""
        self.state = state
        self.out_dir = out_dir
        self.metrics_port = metrics_port
        self.say = say
        self.progress = progress
        self.clock = HoldableReplayClock(state.time("sim_now"), scenario.speedup)
        """Simulated time; held while the demo builds a trainer or a Session (see ``greentrain.demo.clock``)."""
        self.interrupted = False
        self.metrics_url: str | None = None
        self.segments: list[str] = []
        self._session: Session | None = None
        self._real_steps_s: list[float] = []
        """Real seconds of each training step so far (the steps stay real training)."""
        self._monitor: Monitor | None = None
        self._event_log: EventLog | None = None

    @property
    def jsonl(self) -> Path:
        return self.out_dir / "run.jsonl"

    # ---- the whole job -------------------------------------------------------------------------------

    def run(self) -> str:
        """Run segments until the job finishes or is interrupted; returns the last SegmentEnd."""
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            trainer: Trainer | None = self._new_trainer()
            self._start_monitor()
            end = SegmentEnd.PAUSED
            while end == SegmentEnd.PAUSED:
                end = self._segment(trainer or self._new_trainer())
                trainer = None
                self.segments.append(end)
            return end
        finally:
            self.clock.hold()
            signal.signal(signal.SIGINT, previous)
            self._stop_monitor()
            self.state.sim_now = self.clock.now().isoformat()
            self.state.finished = self.segments[-1:] == [SegmentEnd.FINISHED]
            save_demo_state(self.out_dir, self.state)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.interrupted:  # second Ctrl-C: stop now; the newest checkpoint still resumes
            raise KeyboardInterrupt
        self.interrupted = True
        print("\ngreentrain demo: interrupted; stopping (training stops at the next step boundary with a "
              "checkpoint; Ctrl-C again to abort)",
              file=sys.stderr, flush=True)
        engine = self._session.engine if self._session is not None else None
        if engine is not None:
            engine.interrupt()  # a running wait returns at once

    def _start_monitor(self) -> None:
        """One energy monitor for the whole job, timestamping samples on the replay clock.

        It measures only what the training uses: the host CPU always (it drives the loop), the first
        visible GPU only when the demo trains on it; an idle GPU beside a CPU run is not this job's.
        """
        from greentrain.device import discover
        from greentrain.events import EventLog
        from greentrain.monitor import Monitor

        devices = discover()
        gpus = list(devices.gpus)[:1] if demo_device() == "cuda" else []
        self._event_log = EventLog(self.jsonl)
        self._monitor = Monitor(gpus, list(devices.cpus), event_log=self._event_log,
                                wall_clock=self.clock, event_interval_s=1.0)
        self._monitor.start()

    def _stop_monitor(self) -> None:
        if self._monitor is not None:
            self._monitor.stop()
        if self._event_log is not None:
            self._event_log.close()

    # ---- one segment ---------------------------------------------------------------------------------

    def _new_trainer(self) -> Trainer:
        """A fresh trainer: the Session's ``load`` restores it from the newest checkpoint."""
        from greentrain.runtime.trainer import Trainer

        return Trainer(demo_config(self.out_dir, self.state.steps_total))

    def _segment(self, trainer: Trainer) -> str:
        session = self._make_session(trainer)
        self._session = session
        try:
            with session:  # its first wait (a delayed start) runs the clock; training steps advance it
                self._announce_metrics(session)
                if self.interrupted:  # Ctrl-C during the wait for a clean window
                    return SegmentEnd.INTERRUPTED
                return self._train(trainer, session)
        finally:
            self.clock.hold()
            self._session = None

    def _make_session(self, trainer: Trainer) -> Session:
        from greentrain.session import Session

        def save(next_step: int) -> None:
            if next_step != trainer.step:
                raise RuntimeError(f"session asked to save step {next_step}, trainer is at {trainer.step}")
            trainer.save_checkpoint()

        sc = self.scenario
        return Session(
            demo_policy(self.state.policy, self.state.reserve_h), zone=sc.zone, provider=self.provider, deadline=self.state.time("deadline"),
            steps_total=self.state.steps_total, save=save, load=trainer.resume, pause_mode="checkpoint",
            clock=self.clock, metrics_port=self.metrics_port, job="demo", jsonl=self.jsonl,
            monitor=self._monitor, step_time_s=self.step_job_s, relaunch="none",
            state_path=self.out_dir / STATE_FILE_NAME, progress=self.progress,
            decide_interval_s=DECIDE_INTERVAL_S, actuation=self.actuation,
            deadline_policy=self.state.deadline_policy, codecarbon_csv=self.codecarbon_csv,
        )

    @property
    def step_job_s(self) -> float:
        """Simulated seconds each training step stands for (fixed when the job was sized)."""
        return self.state.step_job_s or self.state.step_time_real_s * self.scenario.speedup

    def _remeasure(self, session: Session) -> None:
        """Keep the real step time this segment measured (informational: the simulated work per step is fixed)."""
        times = session.engine.progress.times if session.engine is not None else None
        if times is not None and times.count >= 2 and self._real_steps_s:
            self.state.step_time_measured_real_s = statistics.median(self._real_steps_s)

    def _announce_metrics(self, session: Session) -> None:
        server = session.metrics
        if server is None or self.metrics_url is not None:
            return
        port = int(server.port)
        self.metrics_port = port  # later segments serve on the same port
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"

    def _train(self, trainer: Trainer, session: Session) -> str:
        engine = session.engine
        if engine is None:
            raise ConfigError("the demo trains inside 'with Session(...)'")
        trainer.step = max(trainer.step, session.start_step)
        if trainer.step > 0:
            self.say(f"resumed from the checkpoint at step {trainer.step} ({_fmt(self.clock.now())})")
        elif (self.clock.now() - self.scenario.start).total_seconds() < 600:  # the policy did not wait at all
            reason = _reason(session) or "no cleaner window ahead"
            self.say(f"no net saving from waiting: running at once ({reason})")
        first = session.last_decision.precision if session.last_decision is not None else None
        if first and first != trainer.precision:
            trainer.set_precision(first)
        trainer.hook = _Hook(session, self)
        bar = StepProgress(self.state.steps_total, trainer.step, self.clock, enabled=self.progress)

        def on_step(metrics: StepMetrics) -> None:
            self._real_steps_s.append(metrics.step_time_s)
            bar.update(metrics)

        trainer.on_step = on_step
        with bar:
            trainer.fit(resume=False)
        self.state.began = self.state.began or trainer.step > 0
        self._remeasure(session)
        if self.interrupted:
            # The trainer saved on its way out: the job's state moves with that checkpoint, so the
            # summary counts the segment's work as done, not lost.
            if engine.progress.steps_done == trainer.step:
                session.saved(trainer.step)
            self.say(f"stopped at step {trainer.step} with a checkpoint ({_fmt(self.clock.now())})")
            return SegmentEnd.INTERRUPTED
        if session.finished:
            self.say(f"finished all {self.state.steps_total} steps at {_fmt(engine.progress.finished_at)}")
            return SegmentEnd.FINISHED
        if not session.should_stop:
            return SegmentEnd.FINISHED  # the trainer ran out of steps without the session: nothing to resume
        reason = _reason(session) or "dirty window"
        # One time per decision: the wait says the resume (the one the run log and the summary give).
        self.say(f"paused after step {trainer.step}, checkpoint saved")
        interrupted = engine.wait_until(session.resume_at, reason)
        if interrupted or self.interrupted:
            self.interrupted = True
            return SegmentEnd.INTERRUPTED
        return SegmentEnd.PAUSED


def _fmt(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC") if when is not None else "-"


def _reason(session: Session) -> str:
    """Why the session's last decision was taken ("" before the first)."""
    return session.last_decision.reason if session.last_decision is not None else ""
