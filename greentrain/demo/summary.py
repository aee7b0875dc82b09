"""The end-of-demo summary: what the job cost, what waiting saved, and whether it met its deadline.

Totals come from the run log the engine wrote (``run.jsonl``): the last
``summary`` event carries the job's cumulative energy, emissions and
emissions avoided versus run-now (the engine's own ledger, restored across
pauses); energy source labels come from the monitor's ``sample`` events;
times are on the simulated calendar of the replayed trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from greentrain.userfile import JSONObject

if TYPE_CHECKING:
    from rich.console import Console

from greentrain.demo.state import DemoState
from greentrain.units import format_duration_s, format_energy_j, format_masses_g, format_time

__all__ = ["DemoSummary", "render_summary", "rows", "summary_json", "summarize_run"]


@dataclass(slots=True, kw_only=True)
class DemoSummary:
    """The numbers of one demo job (simulated times, measured/estimated energy)."""

    steps_done: int
    steps_total: int
    step_indices: list[int]
    """The ``step`` field of every step event, in log order (1-based: step k ended the k-th step)."""
    losses: list[float]
    energy_j: float
    energy_sources: dict[str, str]
    """Device name -> provenance label (measured, integrated, estimated)."""
    emissions_g: float
    """All the job's emissions: its steps and its idle draw while it waited (the process held the machine)."""
    steps_emissions_g: float
    """Emissions of the training steps alone."""
    steps_energy_j: float = 0.0
    """Energy of the training steps alone (the rest of ``energy_j`` was drawn while waiting)."""
    emissions_avoided_g: float
    """The engine's figure: run-now minus ``emissions_g`` (idle draw while waiting counts against it)."""
    run_now_g: float
    """The same steps, run back to back from submission (the engine's counterfactual)."""
    submitted: datetime
    first_step: datetime | None
    finished_at: datetime | None
    deadline: datetime
    pauses: int
    waits: int
    notes: list[str] = field(default_factory=list)

    @property
    def deadline_met(self) -> bool:
        return self.finished_at is not None and self.finished_at <= self.deadline


def _events(path: Path) -> list[JSONObject]:
    events = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut by a hard kill: the report skips it too
    return events


def _time(text: object) -> datetime:
    return datetime.fromisoformat(str(text))


def _num(value: object) -> float:
    """A run-log number as ``float()`` reads it (a number or its text); anything else is a TypeError."""
    if not isinstance(value, int | float | str):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def summarize_run(jsonl: Path, state: DemoState) -> DemoSummary:
    """Read ``jsonl`` (the demo's run log) into a DemoSummary."""
    events = _events(jsonl)
    steps = [e for e in events if e.get("event") == "step"]
    summaries = [e for e in events if e.get("event") == "summary"]
    last = summaries[-1] if summaries else {}
    sources = {str(e.get("device")): str(e.get("source")) for e in events
               if e.get("event") == "sample" and e.get("source") and not e.get("failed")}
    states = [e.get("state") for e in events if e.get("event") == "state"]
    pauses = sum(1 for i, s in enumerate(states) if s == "paused" and (i == 0 or states[i - 1] != "paused"))
    waits = sum(1 for e in events if e.get("event") == "action" and e.get("action") == "delay_start")
    finished = bool(last.get("finished")) and steps
    emissions_g = _num(last.get("emissions_g") or 0.0)
    avoided_g = _num(last.get("emissions_avoided_g") or 0.0)
    return DemoSummary(
        steps_done=int(_num(last.get("steps", len(steps)))), steps_total=state.steps_total,
        step_indices=[int(_num(e["step"])) for e in steps], losses=[_num(e.get("loss", "nan")) for e in steps],
        energy_j=_num(last.get("energy_j") or 0.0), energy_sources=sources, emissions_g=emissions_g,
        steps_emissions_g=sum(_num(e.get("emissions_g") or 0.0) for e in steps),
        steps_energy_j=sum(_num(e.get("energy_j") or 0.0) for e in steps),
        emissions_avoided_g=avoided_g, run_now_g=emissions_g + avoided_g, submitted=state.time("start"),
        first_step=_time(steps[0]["t"]) if steps else None,
        finished_at=_time(steps[-1]["t"]) if finished else None, deadline=state.time("deadline"),
        pauses=pauses, waits=waits, notes=[str(e.get("message")) for e in events if e.get("event") == "note"],
    )


def _hours(start: datetime, end: datetime) -> str:
    return format_duration_s((end - start).total_seconds())


def _fmt(when: datetime | None) -> str:
    return format_time(when)


def rows(s: DemoSummary) -> list[tuple[str, str]]:
    """(label, value) rows of the table; every figure scaled by ``greentrain.units``."""
    labels = ", ".join(f"{device}: {source}" for device, source in sorted(s.energy_sources.items())) or "unmeasured"
    timing_g = s.run_now_g - s.steps_emissions_g
    pct = (lambda g: f"{100 * g / s.run_now_g:.1f} %") if s.run_now_g > 0 else (lambda g: "n/a")
    idle_g = max(0.0, s.emissions_g - s.steps_emissions_g)
    # every mass of the table in one unit: never "0 gCO2eq" beside "mgCO2eq"
    emitted, steps_g, idle, run_now, avoided, timing = format_masses_g(
        [s.emissions_g, s.steps_emissions_g, idle_g, s.run_now_g, s.emissions_avoided_g, timing_g])
    finished = (f"{_fmt(s.finished_at)} — {_hours(s.submitted, s.finished_at)} of {_hours(s.submitted, s.deadline)}"
                f" allowed: {'deadline met' if s.deadline_met else 'DEADLINE MISSED'}"
                if s.finished_at else f"not finished ({s.steps_done}/{s.steps_total} steps)")
    return [
        ("Steps", f"{s.steps_done} / {s.steps_total}"),
        ("Submitted (simulated)", _fmt(s.submitted)),
        ("First step (simulated)", _fmt(s.first_step) + (" (waited for a clean window)" if s.waits else "")),
        ("Pauses (checkpoint + resume)", str(s.pauses)),
        ("Finished vs deadline (simulated)", finished),
        ("Energy", f"{format_energy_j(s.energy_j)} ({labels})"),
        ("Emissions", (f"{emitted} = training {steps_g} + idle while waiting {idle} "
                       "(energy × trace intensity of its interval)")),
        ("Run-now emissions (same steps, no wait)", run_now),
        ("Avoided vs run-now (net)", (f"{avoided} ({pct(s.emissions_avoided_g)}) = timing the steps {timing} − idle "
                                      f"while waiting {idle}")),
    ]


def summary_json(s: DemoSummary) -> JSONObject:
    """The end summary as one JSON-ready object (``greentrain demo --json``). "Avoided" is net: run-now
    minus everything the job emitted, waiting included; the gross figure (timing the steps alone) and
    what waiting cost follow it."""
    waiting_g = max(0.0, s.emissions_g - s.steps_emissions_g)
    return {
        "emissions_g": s.emissions_g,
        "run_now_emissions_g": s.run_now_g,
        "emissions_avoided_net_g": s.emissions_avoided_g,
        "emissions_avoided_gross_g": s.run_now_g - s.steps_emissions_g,
        "waiting_emissions_g": waiting_g,
        "energy_j": s.energy_j,
        "waiting_energy_j": max(0.0, s.energy_j - s.steps_energy_j),
        "energy_sources": dict(s.energy_sources),
        "steps_done": s.steps_done,
        "steps_total": s.steps_total,
        "pauses": s.pauses,
        "waits": s.waits,
        "submitted": s.submitted.isoformat(),
        "first_step": s.first_step.isoformat() if s.first_step else None,
        "finished_at": s.finished_at.isoformat() if s.finished_at else None,
        "deadline": s.deadline.isoformat(),
        "deadline_met": s.deadline_met,
        "notes": list(s.notes),
    }


def render_summary(s: DemoSummary, console: Console) -> None:
    """Print the table with rich."""
    from rich.table import Table

    table = Table(title="greentrain demo: summary", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for label, value in rows(s):
        table.add_row(label, value)
    console.print(table)
    for note in s.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
