"""The figures a finished job reports, taken from one place, and the lines that print them.

``job_figures`` reads the engine's ledger and deadline verdict once; the
summary line every front end says (``greentrain.job.announce``) and anything
else that reports a job's totals use it, so what "avoided" means is decided here and nowhere
else (the ledger's figure: run-now at default settings minus this job,
idle draw while waiting included).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from greentrain.engine.advice import advice_summary
from greentrain.engine.ledger import LedgerEntry
from greentrain.provenance import Source

if TYPE_CHECKING:
    from greentrain.engine.collaborators import Loss
    from greentrain.engine.core import EngineCore

__all__ = ["JobFigures", "job_figures", "summary_fields", "step_fields"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFigures:
    """A job's totals for people; None where unknown (no monitor, no carbon signal)."""

    energy_j: float | None
    emissions_g: float | None
    avoided_g: float | None
    deadline: datetime | None
    finished_at: datetime | None
    deadline_met: bool | None
    simulated: bool


def job_figures(engine: EngineCore) -> JobFigures:
    """Totals of ``engine`` after ``close`` (the verdict is set there)."""
    priced = engine.signals.signals is not None and engine.signals.last is not None
    measured = engine.measures_energy
    verdict = engine.deadline.verdict
    return JobFigures(
        energy_j=engine.ledger.energy_j if measured else None,
        emissions_g=engine.ledger.total_emissions_g() if priced and measured else None,
        avoided_g=engine.ledger.total_avoided_g() if priced and measured else None,
        deadline=engine.deadline.at, finished_at=verdict.finished_at if verdict else None,
        deadline_met=verdict.met if verdict and verdict.finished_at else None,
        simulated=engine.clock.simulated,
    )


def summary_fields(engine: EngineCore, finished_at: datetime | None) -> dict[str, object]:
    """The engine's ``summary`` event: totals, the deadline verdict and which clock the times are on."""
    stats = engine.io.job_stats.snapshot()
    verdict = engine.deadline.verdict
    progress, cost = engine.progress, engine.pause_cost
    fields: dict[str, object] = {
        "steps": progress.steps_done, "tokens": stats.tokens_total, "energy_j": engine.ledger.energy_j,
        "emissions_g": engine.ledger.total_emissions_g(), "emissions_avoided_g": engine.ledger.total_avoided_g(),
        "running_s": progress.running_s, "deadline": engine.deadline.at, "finished": progress.finished,
        "waiting_energy_j": cost.energy_j, "waiting_power_w": cost.value_w, "waiting_power_source": cost.source,
        "finished_at": finished_at,
        "deadline_met": verdict.met if verdict is not None and finished_at is not None else None,
        "clock": "simulated" if engine.clock.simulated else "wall",
        "notes": list(engine.notes),
    }
    advice = advice_summary(engine)
    if advice is not None:
        fields["advice"] = advice
    if not engine.ledger.emissions_known:  # null with the reason, never 0 g
        fields["unpriced_energy_j"] = engine.ledger.unpriced_energy_j
        fields["emissions_unknown"] = stats.emissions_unknown_reason or engine.signals.unknown_reason()
    return fields


def step_fields(engine: EngineCore, entry: LedgerEntry, tokens: int, loss: Loss, source: Source | None) -> dict[str, object]:
    """The engine's ``step`` event: duration, energy and its source, emissions (or why unknown), loss."""
    steps = engine.progress.steps_done
    fields: dict[str, object] = {"step": steps, "duration_s": engine.progress.last_step_s,
                                 "energy_j": entry.energy_j, "emissions_g": entry.emissions_g, "tokens": int(tokens)}
    if not entry.priced:
        fields["emissions_unknown"] = engine.io.job_stats.emissions_unknown_reason
    if source is not None:
        fields["source"] = str(source)
    value = _loggable_loss(loss, steps)
    if value is not None:
        fields["loss"] = value
    return fields


LOSS_LOG_EVERY_STEPS = 10
"""A loss still on an accelerator is logged at every 10th step only: reading it waits for the device, and a
wait at every step boundary would cost throughput (numbers and CPU tensors are logged at every step)."""


def _loggable_loss(loss: Loss, step: int) -> float | None:
    if loss is None:
        return None
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported: not imported here for it
    on_device = torch is not None and isinstance(loss, torch.Tensor) and loss.device.type != "cpu"
    if on_device and step % LOSS_LOG_EVERY_STEPS:
        return None
    try:
        return float(loss)
    except (TypeError, ValueError, RuntimeError):
        return None
