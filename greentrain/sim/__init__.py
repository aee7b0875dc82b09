"""Trace-driven simulator: replay a real carbon trace (and a measured GPU profile) through a policy.

The policy code is the same the live engine runs; forecasts come from the
forecaster fed only the trace up to each decision. See ``docs/policies.md``.
"""

from greentrain.sim.baselines import best_window, oracle, run_now, scaling_oracle, timing_only
from greentrain.sim.job import SimJob, profile_modes
from greentrain.sim.ledger import Interval, Ledger
from greentrain.sim.noise import NO_NOISE, RateNoise, RateProfile, parse_rate_noise
from greentrain.sim.perfect import PerfectForecaster
from greentrain.sim.replay import TraceIndex, simulate_run
from greentrain.sim.report import RunResult, forecast_summary, run_to_json, simulate, summarize

__all__ = [
    "NO_NOISE",
    "Interval",
    "RateNoise",
    "RateProfile",
    "parse_rate_noise",
    "Ledger",
    "PerfectForecaster",
    "RunResult",
    "SimJob",
    "TraceIndex",
    "best_window",
    "forecast_summary",
    "oracle",
    "profile_modes",
    "run_now",
    "scaling_oracle",
    "run_to_json",
    "simulate",
    "simulate_run",
    "summarize",
    "timing_only",
]
