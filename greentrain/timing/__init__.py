"""Timing machinery of the engine: when a job runs, pauses and resumes.

Small modules, one job each: step-time statistics (``stats``), the deadline
guard (``guard``), emissions accounting against the run-now counterfactual
(``ledger``), blocking waits with APScheduler wake-ups and a countdown
(``waiter``), rank-0 decision broadcast (``broadcast``), engine state that
survives a relaunch (``state``), default checkpoints (``checkpoint``) and
process control for ``greentrain run`` (``process``).
"""

from __future__ import annotations

from greentrain.timing.broadcast import Broadcast, LocalBroadcast, TorchBroadcast
from greentrain.timing.guard import check_deadline, latest_safe_resume
from greentrain.timing.stats import StepTimes

__all__ = [
    "Broadcast",
    "LocalBroadcast",
    "TorchBroadcast",
    "StepTimes",
    "latest_safe_resume",
    "check_deadline",
]
