"""The interpolated label travels: step events, the step-energy metric and the run report."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from gt_engine_doubles import RunNowPolicy, TraceSignals, hourly  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, Progress
from greentrain.engine import Engine
from greentrain.events import EventLog, read_events
from greentrain.exporters import names as n
from greentrain.exporters.collector import GreentrainCollector
from greentrain.jobstats import JobStats
from greentrain.monitor import Monitor
from greentrain.report.html import summary_rows
from greentrain.report.model import load_run
from greentrain.testing import FakeGPU

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2022, 3, 1, 1, tzinfo=UTC)


def test_short_steps_are_interpolated_in_events_metrics_and_report(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    seconds = lambda: (clock.now() - T0).total_seconds()  # noqa: E731  (the monitor's clock is the engine's)
    gpu = FakeGPU("v100", time_fn=seconds)
    monitor = Monitor([gpu], time_fn=seconds).start(background=False)
    stats = JobStats(job="j")
    log = EventLog(tmp_path / "run.jsonl")
    signals = TraceSignals(hourly(T0 - timedelta(hours=1), [100] * 4), clock)
    engine = Engine(RunNowPolicy(),
                    Collaborators(clock=clock, signals=signals, monitor=monitor, event_log=log,
                                  job_stats=stats),
                    progress=Progress(steps_total=6),
                    countdown=False)  # fmt: skip
    engine.begin()
    collector = GreentrainCollector(job="j", job_stats=stats)
    metric_sources = []
    for step_s in (0.1, 0.1, 0.5, 0.5, 0.05, 1.0):
        engine.step_begin()
        for _ in range(5):
            clock.advance(step_s / 5)
            monitor.sample()
        engine.step_end(tokens=8)
        labels = [dict(s[1])["source"] for s in collector.samples() if s[0] == n.JOB_STEP_ENERGY.name]
        metric_sources.append(labels)
    engine.close()
    log.close()
    monitor.stop()
    expected = ["interpolated", "interpolated", "measured", "measured", "interpolated", "measured"]
    steps = [e for e in read_events(tmp_path / "run.jsonl") if e["event"] == "step"]
    assert [e["source"] for e in steps] == expected
    assert metric_sources == [[s] for s in expected]  # one series, labelled by the last step
    run = load_run(tmp_path / "run.jsonl")
    assert [s.source for s in run.steps] == expected
    rows = dict(summary_rows(run))
    assert rows["Per-step energy"].startswith("interpolated for 3 of 6 steps") and "totals are measured" in rows[
        "Per-step energy"]
