"""Simulate many starts and turn the results into the ``greentrain simulate --json`` object."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from greentrain.policies.base import Policy
import greentrain.sim.baselines as baselines
from greentrain.policies.worth import DEFAULT_MIN_SAVING_FRAC
from greentrain.signals.forecast.deviation import DeviationTally
from greentrain.sim.fcache import shared_per_hour
from greentrain.sim.job import SimJob
from greentrain.sim.ledger import Ledger
from greentrain.sim.noise import NO_NOISE, RateNoise
from greentrain.sim.replay import ForecasterLike, TraceIndex, simulate_run
from greentrain.userfile import JSONObject, JSONValue

__all__ = ["RunResult", "forecast_summary", "iso", "run_to_json", "simulate", "summarize"]


def iso(when: datetime | None) -> str | None:
    """ISO-8601 UTC with a 'Z'."""
    return None if when is None else when.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class RunResult:
    """One start: the policy's run and the baselines (an elastic job's ``oracle`` is the scaling oracle, and
    ``timing_only`` the best timing at its fixed count)."""

    start: datetime
    deadline: datetime
    policy: Ledger
    decisions: int
    run_now: Ledger
    best_window: Ledger
    best_window_start: datetime
    oracle: Ledger
    timing_only: Ledger | None = None
    forecast_deviation: DeviationTally | None = None
    """The forecasts the policy's decisions used, scored against the trace."""

    @property
    def deadline_met(self) -> bool:
        return self.policy.finished_at is not None and self.policy.finished_at <= self.deadline


def simulate(trace: TraceIndex, starts: Iterable[datetime], job: SimJob, policy: Policy,
             forecaster: ForecasterLike, *, oracle_bins: int = 4000, noise: RateNoise = NO_NOISE,
             estimate_error: float = 0.0, min_wait_saving: float = DEFAULT_MIN_SAVING_FRAC,
             engine_gate: bool = True) -> list[RunResult]:
    """Replay ``policy`` from each start, with baselines; the trace must cover every deadline. With ``noise``
    each start gets its realised work rate (``sim/noise.py``): the policy faces it as it runs, and the
    baselines (the oracle included) are scored on the same realised rate."""
    forecaster = shared_per_hour(forecaster)  # one forecast per hour for all starts, when that is exact
    horizon_s = 2 * max(job.deadline_s, job.work_s) + 3600.0
    results = []
    for start in starts:
        rates = None if noise.kind == "none" else noise.profile(start, horizon_s)
        run = simulate_run(trace, start, job, policy, forecaster, rates, estimate_error=estimate_error,
                           min_wait_saving=min_wait_saving, engine_gate=engine_gate)
        window, window_start = baselines.best_window(trace, start, job, rates)
        fixed = baselines.oracle(trace, start, job, oracle_bins, rates)
        scaled = job.scaling is not None  # the CLI refuses rate noise with a scaling profile
        results.append(RunResult(
            start=start, deadline=run.deadline, policy=run.ledger, decisions=run.decisions,
            run_now=baselines.run_now(trace, start, job, rates), best_window=window,
            best_window_start=window_start,
            oracle=baselines.scaling_oracle(trace, start, job) if scaled else fixed,
            timing_only=fixed if scaled else None, forecast_deviation=run.forecast_deviation,
        ))
    return results


def _totals(ledger: Ledger) -> JSONObject:
    return {"emissions_g": round(ledger.emissions_g, 6), "energy_kwh": round(ledger.energy_kwh, 9),
            "waiting_energy_kwh": round(ledger.waiting_energy_kwh, 9)}


def run_to_json(result: RunResult, *, power: bool = False) -> JSONObject:
    """One entry of ``runs`` (``power_limit_w`` per interval when ``power``; ``replicas`` for an elastic job)."""
    schedule: list[JSONValue] = []
    for interval in result.policy.schedule:
        item: JSONObject = {"start": iso(interval.start), "end": iso(interval.end)}
        if power:
            item["power_limit_w"] = interval.power_limit_w
        if interval.replicas is not None:
            item["replicas"] = interval.replicas
        schedule.append(item)
    oracle: JSONObject = {**_totals(result.oracle), "resumes": result.oracle.resumes}
    baselines_json: JSONObject = {
        "run_now": _totals(result.run_now),
        "best_window": {**_totals(result.best_window), "start": iso(result.best_window_start)},
        "oracle": oracle,
    }
    if result.timing_only is not None:
        oracle["rescales"] = result.oracle.rescales
        oracle["schedule"] = [
            {"start": iso(i.start), "end": iso(i.end), "replicas": i.replicas} for i in result.oracle.schedule]
        baselines_json["timing_only"] = {**_totals(result.timing_only), "resumes": result.timing_only.resumes}
    scaling = {"rescales": result.policy.rescales} if result.timing_only is not None else {}
    return {
        "start": iso(result.start),
        "deadline": iso(result.deadline),
        "schedule": schedule,
        "finished_at": iso(result.policy.finished_at),
        "deadline_met": result.deadline_met,
        **_totals(result.policy),
        "resumes": result.policy.resumes,
        **scaling,
        "baselines": baselines_json,
    }


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 6) if denominator > 1e-9 else None


def summarize(results: Sequence[RunResult], policy_name: str) -> JSONObject:
    """Totals over all runs; savings are fractions of run-now's emissions."""
    policy_g = sum(r.policy.emissions_g for r in results)
    run_now_g = sum(r.run_now.emissions_g for r in results)
    window_g = sum(r.best_window.emissions_g for r in results)
    oracle_g = sum(r.oracle.emissions_g for r in results)
    timing = [r.timing_only for r in results if r.timing_only is not None]
    extra: JSONObject = {}
    if timing and len(timing) == len(results):
        timing_g = sum(t.emissions_g for t in timing)
        extra = {"timing_only_emissions_g": round(timing_g, 6),
                 "timing_only_saving_vs_run_now": _ratio(run_now_g - timing_g, run_now_g),
                 "rescales": sum(r.policy.rescales for r in results)}
    return {
        "policy": policy_name,
        "runs": len(results),
        "deadlines_missed": sum(not r.deadline_met for r in results),
        "emissions_g": round(policy_g, 6),
        "run_now_emissions_g": round(run_now_g, 6),
        "best_window_emissions_g": round(window_g, 6),
        "oracle_emissions_g": round(oracle_g, 6),
        "saving_vs_run_now": _ratio(run_now_g - policy_g, run_now_g),
        "best_window_saving_vs_run_now": _ratio(run_now_g - window_g, run_now_g),
        "oracle_saving_vs_run_now": _ratio(run_now_g - oracle_g, run_now_g),
        "fraction_of_oracle_saving": _ratio(run_now_g - policy_g, run_now_g - oracle_g),
        "waiting_energy_kwh": round(sum(r.policy.waiting_energy_kwh for r in results), 9),
        "runs_worse_than_run_now": sum(r.policy.emissions_g > r.run_now.emissions_g + 1e-9 for r in results),
        **extra,
    }


def forecast_summary(results: Sequence[RunResult], kind: str) -> JSONObject:
    """What the decisions planned on (``kind``) and how far off it was at each scored lead time, over every
    run (measured: the forecasts used, against the trace; a decision's forecast counts once per run)."""
    tally = DeviationTally()
    for result in results:
        if result.forecast_deviation is not None:
            tally.merge(result.forecast_deviation)
    return {"kind": kind, "forecasts": tally.forecasts, "by_hours_ahead": {
        str(ahead): {"mae_g_per_kwh": round(d.mae_g_per_kwh, 1), "bias_g_per_kwh": round(d.bias_g_per_kwh, 1),
                     "actual_mean_g_per_kwh": round(d.actual_mean_g_per_kwh, 1), "pairs": d.count}
        for ahead, d in tally.by_lead_time().items()}}
