"""``greentrain whatif``'s figures: one JSON object per run and the totals, from one place.

Times are in each run's own calendar (UTC); where the carbon signal is a
trace of another year, ``signal`` says which dates priced the run. Emissions
are grams CO2eq on the carbon signal named; CodeCarbon's own figure (its
annual-average intensity) is given beside them for reference only.
"""

from __future__ import annotations

from greentrain.codecarbon import SkippedRow
from greentrain.sim.report import iso
from greentrain.sim.whatif import PRECISION_NOTE, WhatIfRun
from greentrain.userfile import JSONObject, JSONValue

__all__ = ["run_json", "totals", "skipped_json"]


def _g(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def run_json(item: WhatIfRun) -> JSONObject:
    """One run: what happened, what greentrain would have done, the net saving and the delay."""
    run, result = item.run, item.result
    schedule: list[JSONValue] = [
        {"start": iso(item.local(i.start)), "end": iso(item.local(i.end)), "power_limit_w": i.power_limit_w}
        for i in result.policy.schedule]
    return {
        "row": run.row, "project_name": run.project_name, "run_id": run.run_id, "zone": item.zone,
        "signal": item.signal, "started_at": iso(run.started_at), "ended_at": iso(run.ended_at),
        "duration_s": round(run.duration_s, 3), "energy_kwh": run.energy_kwh, "mean_power_w": round(run.power_w, 3),
        "codecarbon_emissions_g": None if run.emissions_kg is None else _g(run.emissions_kg * 1000),
        "deadline": iso(item.deadline), "schedule": schedule,
        "finished_at": iso(item.local(result.policy.finished_at)), "deadline_met": result.deadline_met,
        "resumes": result.policy.resumes, "power_limits_w": list(item.power_limits_w),
        "profile": item.profile, "precision": PRECISION_NOTE,
        "run_now_emissions_g": _g(result.run_now.emissions_g), "emissions_g": _g(result.policy.emissions_g),
        "saving_g": _g(item.saving_g), "waiting_energy_kwh": round(result.policy.waiting_energy_kwh, 9),
        "delay_s": None if item.delay_s is None else round(item.delay_s, 1),
        "oracle_emissions_g": _g(result.oracle.emissions_g), "notes": list(item.notes),
    }


def skipped_json(skipped: list[SkippedRow]) -> list[JSONValue]:
    return [{"row": s.row, "reason": s.reason} for s in skipped]


def totals(items: list[WhatIfRun], policy: str) -> JSONObject:
    """Totals over the replayed runs; the saving is a fraction of run-now's emissions."""
    run_now_g = sum(i.result.run_now.emissions_g for i in items)
    policy_g = sum(i.result.policy.emissions_g for i in items)
    delays = [i.delay_s for i in items if i.delay_s is not None]
    recorded = [i.run.emissions_kg for i in items if i.run.emissions_kg is not None]
    return {
        "policy": policy, "runs": len(items), "energy_kwh": round(sum(i.run.energy_kwh for i in items), 9),
        "run_now_emissions_g": _g(run_now_g), "emissions_g": _g(policy_g), "saving_g": _g(run_now_g - policy_g),
        "saving_fraction": round((run_now_g - policy_g) / run_now_g, 6) if run_now_g > 1e-12 else None,
        "waiting_energy_kwh": round(sum(i.result.policy.waiting_energy_kwh for i in items), 9),
        "deadlines_missed": sum(not i.result.deadline_met for i in items),
        "mean_delay_s": round(sum(delays) / len(delays), 1) if delays else None,
        "max_delay_s": round(max(delays), 1) if delays else None,
        "runs_with_power_limit": sum(bool(i.power_limits_w) for i in items),
        "codecarbon_emissions_g": _g(sum(recorded) * 1000) if len(recorded) == len(items) else None,
    }
