"""The engine: one closed loop run at training-step boundaries, and its parts.

``loop.Engine`` measures each step, prices it, asks the policy, guards the
deadline and acts. Its parts, one job each and each owning its state: the
job's progress (``progress``, with step-time statistics in ``stats``), deciding
(``decider``), acting on a decision (``adopt``, ``advice`` in advisory mode),
waiting (``waiter``, ``pausemode``), the deadline guard and watch (``deadline_guard``,
``deadlinewatch``), net emissions accounting (``ledger``, ``pausecost``: what
pauses cost, ``budget``), the carbon signal as the engine sees it
(``carbonview``, ``background``), rank-0 decisions shared with every rank
(``broadcast``) and the run log's step and summary records (``jobsummary``).
The objects the engine drives are ``collaborators.Collaborators``. The parts
see the engine through ``core.EngineCore``; none imports ``loop``.
"""

from __future__ import annotations

from greentrain.engine.broadcast import Broadcast, LocalBroadcast, TorchBroadcast
from greentrain.engine.collaborators import Collaborators, NoMonitor
from greentrain.engine.decider import RUN
from greentrain.engine.deadline_guard import DeadlineGuard
from greentrain.engine.loop import Engine
from greentrain.engine.pausecost import PauseCost
from greentrain.engine.progress import Progress

__all__ = ["Engine", "RUN", "Broadcast", "LocalBroadcast", "TorchBroadcast", "Collaborators", "NoMonitor",
           "DeadlineGuard", "PauseCost", "Progress"]
