"""The engine: one closed loop run at training-step boundaries, and its parts.

``loop.Engine`` measures each step, prices it, asks the policy, guards the
deadline and acts. Its parts, one job each: deciding (``decider``), acting on a
decision (``adopt``, ``advice`` in advisory mode), waiting (``waiter``,
``pausemode``), the deadline guard and watch (``guard``, ``deadlinewatch``),
step-time statistics (``stats``), net emissions accounting (``ledger``,
``waiting``, ``budget``), the carbon signal as the engine sees it
(``signalview``, ``background``), rank-0 decisions shared with every rank
(``broadcast``) and the run log's step and summary records (``jobsummary``).
The parts see the engine through ``core.EngineCore``; none imports ``loop``.
"""

from __future__ import annotations

from greentrain.engine.broadcast import Broadcast, LocalBroadcast, TorchBroadcast
from greentrain.engine.decider import RUN
from greentrain.engine.loop import Engine

__all__ = ["Engine", "RUN", "Broadcast", "LocalBroadcast", "TorchBroadcast"]
