"""A fleet simulation as data: per job its schedule and emissions, per policy the totals.

Emissions are ``estimated``: the jobs' draw comes from the per-GPU power (or
a scaling profile's measured ratios), priced with the trace's actual
intensity of each interval. The offline bound is a lower bound, not a
schedule.
"""

from __future__ import annotations

from datetime import datetime

from greentrain.fleet.bound import Bound
from greentrain.fleet.feed import TraceFeed
from greentrain.fleet.simulate import SimResult
from greentrain.userfile import JSONObject

__all__ = ["jobs_json", "summary_json", "fraction_of_bound"]


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def jobs_json(result: SimResult, feed: TraceFeed) -> list[JSONObject]:
    """One entry per job, in the jobs file's order."""
    out: list[JSONObject] = []
    for r in result.runs:
        out.append({
            "id": r.job.id,
            "gpus": r.job.gpus,
            "submit": _iso(r.job.submit),
            "deadline": _iso(r.job.deadline),
            "work_hours": r.job.work_h,
            "partition": r.job.partition,
            "places": list(r.job.places),
            "schedule": [{"start": _iso(feed.at(start)), "end": _iso(feed.at(end)), "gpus": int(gpus),
                          "partition": where}
                         for (start, end, gpus), where in zip(r.segments, r.segment_partitions, strict=True)
                         if end > start],
            "finished": _iso(feed.at(r.finished_h)) if r.finished_h is not None else None,
            "deadline_met": r.finished_h is not None and r.finished_h <= r.deadline_h + 1e-6,
            "resumes": r.resumes,
            "migrations": r.migrations,
            "energy_kwh": round(r.energy_kwh, 6),
            "emissions_g": round(r.emissions_g, 3),
        })
    return out


def summary_json(result: SimResult, capacity_gpus: int) -> JSONObject:
    """Totals of one policy's run."""
    late = result.late
    return {
        "policy": result.policy,
        "jobs": len(result.runs),
        "emissions_g": round(result.emissions_g, 3),
        "energy_kwh": round(result.energy_kwh, 6),
        "late_jobs": len(late),
        "late_job_ids": [r.job.id for r in late],
        "peak_gpus_in_use": result.peak_gpus,
        "capacity_gpus": capacity_gpus,
        "capacity_exceeded": result.capacity_exceeded,
        "resumes": sum(r.resumes for r in result.runs),
        "migrations": result.migrations,
        "partitions": _by_partition(result),
        "decisions": result.decisions,
        "source": "estimated",
    }


def _by_partition(result: SimResult) -> JSONObject:
    """Per partition: the jobs' hours there, GPU-hours, energy and emissions (estimated)."""
    out: dict[str, dict[str, float]] = {}
    for r in result.runs:
        for where, (energy_kwh, emissions_g, gpu_h) in r.by_partition.items():
            row = out.setdefault(where, {"gpu_hours": 0.0, "energy_kwh": 0.0, "emissions_g": 0.0})
            row["gpu_hours"] += gpu_h
            row["energy_kwh"] += energy_kwh
            row["emissions_g"] += emissions_g
    return {name: {k: round(v, 3) for k, v in row.items()} for name, row in sorted(out.items())}


def fraction_of_bound(run_now_g: float, policy_g: float, bound: Bound) -> float | None:
    """(run-now - policy) / (run-now - bound): 1.0 reaches the bound, 0 saves nothing; None if no room."""
    room = run_now_g - bound.emissions_g
    if room <= 1e-9 * max(1.0, run_now_g):
        return None
    return (run_now_g - policy_g) / room
