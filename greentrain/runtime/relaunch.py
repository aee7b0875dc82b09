"""The elastic launcher: run the ranks at a replica count, relaunch them at the count they asked for.

``ElasticLauncher.run`` starts the job at a count through ``launch(replicas)``
(``greentrain train`` passes a torchrun call; tests pass ranks from a
forkserver) and reads what the ranks left in the checkpoint folder when they
exit:

- a new replica request (``greentrain-replicas.json``, written by rank 0 after
  the checkpoint at that step is complete): relaunch at the new count, where
  DCP reshards the checkpoint on load;
- a policy pause (``greentrain-state.json`` names a resume time): wait, then
  relaunch at the count that last worked;
- a failure at a count that has not trained yet (no devices, a node that does
  not come up, out of memory at that size, a kill mid-reshard): fall back to
  the last count that trained, with a note; the count is never planned again
  in this job. The checkpoint folder is never touched: the relaunch resumes
  from the newest *complete* checkpoint, which a half-written one (killed
  mid-save) never replaces;
- any other failure: up to ``max_restarts`` relaunches at the same count, then
  the failure is the launcher's status.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from greentrain.runtime.checkpoint import latest_step
from greentrain.runtime.elastic import ReplicaState

__all__ = ["ElasticLauncher"]

log = logging.getLogger("greentrain.relaunch")


class ElasticLauncher:
    """Launches an elastic job until it finishes; ``run()`` returns the last launch's status (0 = done)."""

    def __init__(self, folder: str | Path, replicas: int, launch: Callable[[int], int], *,
                 max_restarts: int = 0, resume_at: Callable[[], datetime | None] | None = None,
                 note: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.folder = Path(folder)
        self.start_replicas = replicas
        self.launch = launch
        self.max_restarts = max_restarts
        self.resume_at = resume_at or (lambda: None)
        self.note = note or log.warning
        self.sleep = sleep
        self.now = now
        self.launches: list[tuple[int, int]] = []
        """(replicas, status) of every launch, in order."""

    def run(self) -> int:
        state = ReplicaState.load(self.folder)  # the whole command relaunched: continue where it stood
        size = state.replicas if state is not None else self.start_replicas
        restarts = 0
        last_pause: datetime | None = None
        while True:
            before = ReplicaState.load(self.folder)
            status = self.launch(size)
            self.launches.append((size, status))
            if status == 0:
                return 0
            after = ReplicaState.load(self.folder)
            if after is not None and (before is None or after.changes > before.changes):
                self.note(f"replicas {size} -> {after.replicas} at step {after.step} "
                          f"(checkpoint saved; relaunching, DCP reshards on load): {after.reason}")
                size, restarts = after.replicas, 0
                continue
            pause = self.resume_at()
            if pause is not None and pause != last_pause:
                last_pause, restarts = pause, 0
                wait_s = max(0.0, (pause - self.now()).total_seconds())
                self.note(f"paused by policy (0 replicas, released); relaunching at {size} replicas at "
                          f"{pause.isoformat()} ({wait_s:.0f} s)")
                self.sleep(wait_s)
                continue
            working = after.working if after is not None else None  # rank 0 records a count once it trains
            if working is not None and size != working:
                self._fall_back(size, working, status, after)
                size, restarts = working, 0
                continue
            if restarts < self.max_restarts:
                restarts += 1
                self.note(f"launch at {size} replicas failed (exit {status}); restart {restarts} of "
                          f"{self.max_restarts} from the newest complete checkpoint")
                continue
            return status

    def _fall_back(self, failed: int, working: int, status: int, state: ReplicaState | None) -> None:
        """Record ``failed`` as never to be planned again and relaunch at ``working``; the checkpoints stay."""
        state = state or ReplicaState(replicas=working)
        state.failed = sorted({*state.failed, failed})
        state.replicas = working
        state.working = working
        state.reason = f"launch at {failed} replicas failed (exit {status})"
        state.save(self.folder)
        step = latest_step(self.folder)
        self.note(f"relaunch at {failed} replicas failed (exit {status}); falling back to {working} replicas, "
                  f"resuming from the newest complete checkpoint (step {step}); {failed} replicas will not be "
                  "planned again in this job")
