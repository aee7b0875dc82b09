"""Forecast error over a fleet benchmark week: Forecaster, same-hour-yesterday and their skill-weighted blend.

For the week that ``benchmarks/fleet.py --weeks W`` replays (from its Monday),
a forecast of 72 hours every 3 hours, each fed the trace up to then (as the
fleet simulator's ``TraceFeed`` does); printed: the mean absolute error 1, 6,
24, 48 and 72 hours ahead, g/kWh.

    python benchmarks/fleet_forecast_error.py TRACE.csv [TRACE.csv ...] [--weeks 10,36]
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from greentrain.fleet.feed import TraceFeed, blend_forecaster
from greentrain.signals.forecast.forecaster import Forecaster, SeasonalNaiveForecaster
from greentrain.signals.trace import load_trace

AHEAD_H = (1, 6, 24, 48, 72)


def week_errors(trace: Path, week: int) -> dict[str, np.ndarray]:
    """Source name -> mean absolute error by hours ahead (1..72) over the week."""
    points = load_trace(trace)
    start = datetime(points[0].start.year, 1, 1, tzinfo=UTC) + timedelta(weeks=week)
    start -= timedelta(days=start.weekday())  # a Monday, as benchmarks/fleet.py
    out = {}
    for name, forecaster in (("Forecaster", Forecaster()), ("same-hour-yesterday", SeasonalNaiveForecaster()),
                             ("blend", blend_forecaster())):
        feed = TraceFeed(points, trace.name, forecaster)
        first = int(feed.hour_of(start))
        errors = [np.abs(feed.view(h, 72)[1:] - feed.actual[h + 1:h + 73]) for h in range(first, first + 168, 3)]
        out[name] = np.mean(errors, axis=0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", type=Path, nargs="+")
    parser.add_argument("--weeks", default="10,36")
    args = parser.parse_args()
    print("| trace | week | source | " + " | ".join(f"{h} h" for h in AHEAD_H) + " |")
    print("|---|---|---|" + "---|" * len(AHEAD_H))
    for trace in args.traces:
        for week in (int(w) for w in args.weeks.split(",")):
            for name, mae in week_errors(trace, week).items():
                cells = " | ".join(f"{mae[h - 1]:.1f}" for h in AHEAD_H)
                print(f"| {trace.stem} | {week} | {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
