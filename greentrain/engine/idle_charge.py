"""What a wait's held devices draw: read it, feed it to the pause cost, and charge it to the job.

A pause that holds its GPUs still draws power; that energy is emitted at the
grid's intensity while waiting, and running now would not have spent it, so
the job's ledger is charged with it and the policy plans with the measured
idle draw (``PauseCost``).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from greentrain.engine.collaborators import HoldsDevices

if TYPE_CHECKING:
    from greentrain.engine.core import EngineCore

__all__ = ["held_energy_j", "observe_pause", "charge_idle"]


def held_energy_j(engine: EngineCore) -> float | None:
    """Energy of the devices a pause holds (``Monitor.held_energy_j``: the GPUs), else the whole total."""
    monitor = engine.io.monitor
    read = monitor.held_energy_j if isinstance(monitor, HoldsDevices) else monitor.total_energy_j
    try:
        value = read()
    except Exception:  # a monitor that cannot read leaves the pause unpriced, never stops the wait
        return None
    return float(value) if isinstance(value, int | float) else None


def observe_pause(engine: EngineCore, now: datetime, *, final: bool, energy_j: float | None = None) -> None:
    """Feed the held devices' draw over this pause so far to the engine's pause cost."""
    if not engine.measures_energy:
        return
    read_j = energy_j if final else held_energy_j(engine)
    note = engine.pause_cost.observe_pause(now, read_j, engine.clock.speedup, final=final)
    if note is not None:
        engine.note(note)
    else:
        engine.log_pause_cost()


def charge_idle(engine: EngineCore) -> None:
    """Idle draw during the wait is real: price it, and run-now would not have spent it."""
    energy_j = held_energy_j(engine)
    now = engine.clock.now()
    observe_pause(engine, now, final=True, energy_j=energy_j)
    started = engine.pause_cost.paused_since
    idle_j = engine.pause_cost.end_pause(now, energy_j, engine.clock.speedup)
    if idle_j is None or started is None:
        return
    entry = engine.charge(idle_j, started + (now - started) / 2, None)
    stats = engine.io.job_stats
    stats.update(waiting_energy_j=stats.waiting_energy_j + entry.energy_j,
                 waiting_power_w=engine.pause_cost.value_w)
