"""The ``greentrain simulate --trace ZONE=FILE ... --json`` object for a job across zones.

Each run gives its segments with their zone, its migrations and its emissions
by zone, beside "stay home" (the same policy pinned to the first zone),
"greenest at start" (pinned to the zone with the cleanest hour at the start),
run-now at home and each zone's perfect-foresight oracle (pinned to that zone:
a move could beat it). Savings are fractions of stay-home's emissions.
"""

from __future__ import annotations

from collections.abc import Sequence

from greentrain.sim.ledger import Ledger
from greentrain.sim.report import iso
from greentrain.sim.zones import ZoneResult
from greentrain.userfile import JSONObject, JSONValue

__all__ = ["zone_run_to_json", "zones_summary"]


def _totals(ledger: Ledger) -> JSONObject:
    return {"emissions_g": round(ledger.emissions_g, 6), "energy_kwh": round(ledger.energy_kwh, 9),
            "waiting_energy_kwh": round(ledger.waiting_energy_kwh, 9)}


def _by_zone(ledger: Ledger) -> JSONObject:
    return {zone: round(grams, 6) for zone, grams in sorted(ledger.emissions_by_zone_g.items())}


def zone_run_to_json(result: ZoneResult) -> JSONObject:
    """One entry of ``runs``: the run's segments (each with its zone) and its baselines."""
    run = result.run
    segments: list[JSONValue] = [{"start": iso(i.start), "end": iso(i.end), "zone": i.zone}
                                 for i in run.ledger.schedule]
    oracles: JSONObject = {zone: _totals(ledger) for zone, ledger in result.oracle_by_zone.items()}
    return {
        "start": iso(run.start),
        "deadline": iso(run.deadline),
        "segments": segments,
        "finished_at": iso(run.ledger.finished_at),
        "deadline_met": run.deadline_met,
        **_totals(run.ledger),
        "resumes": run.ledger.resumes,
        "migrations": run.ledger.migrations,
        "emissions_by_zone_g": _by_zone(run.ledger),
        "baselines": {
            "stay_home": {**_totals(result.stay_home.ledger), "deadline_met": result.stay_home.deadline_met},
            "greenest_at_start": {**_totals(result.greenest_at_start.ledger), "zone": result.greenest_zone,
                                  "deadline_met": result.greenest_at_start.deadline_met},
            "run_now_home": _totals(result.run_now),
            "oracle_by_zone": oracles,
        },
    }


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 6) if denominator > 1e-9 else None


def zones_summary(results: Sequence[ZoneResult], policy_name: str, zones: Sequence[str]) -> JSONObject:
    """Totals over all runs; savings are fractions of stay-home's emissions."""
    policy_g = sum(r.run.ledger.emissions_g for r in results)
    home_g = sum(r.stay_home.ledger.emissions_g for r in results)
    green_g = sum(r.greenest_at_start.ledger.emissions_g for r in results)
    oracle_g = sum(min(o.emissions_g for o in r.oracle_by_zone.values()) for r in results)
    by_zone: dict[str, float] = {}
    for r in results:
        for zone, grams in r.run.ledger.emissions_by_zone_g.items():
            by_zone[zone] = by_zone.get(zone, 0.0) + grams
    return {
        "policy": policy_name,
        "zones": list(zones),
        "home": zones[0],
        "runs": len(results),
        "deadlines_missed": sum(not r.run.deadline_met for r in results),
        "migrations": sum(r.run.ledger.migrations for r in results),
        "runs_that_moved": sum(r.run.ledger.migrations > 0 for r in results),
        "emissions_g": round(policy_g, 6),
        "emissions_by_zone_g": {zone: round(by_zone.get(zone, 0.0), 6) for zone in zones},
        "stay_home_emissions_g": round(home_g, 6),
        "greenest_at_start_emissions_g": round(green_g, 6),
        "run_now_home_emissions_g": round(sum(r.run_now.emissions_g for r in results), 6),
        "best_zone_oracle_emissions_g": round(oracle_g, 6),
        "saving_vs_stay_home": _ratio(home_g - policy_g, home_g),
        "greenest_at_start_saving_vs_stay_home": _ratio(home_g - green_g, home_g),
        "best_zone_oracle_saving_vs_stay_home": _ratio(home_g - oracle_g, home_g),
        "stay_home_deadlines_missed": sum(not r.stay_home.deadline_met for r in results),
        "runs_worse_than_stay_home": sum(r.run.ledger.emissions_g > r.stay_home.ledger.emissions_g + 1e-9
                                         for r in results),
    }
