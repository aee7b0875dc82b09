"""A replayed calendar is part of the job's state: after a checkpoint pause and a re-exec, the script's new
``ReplayClock`` continues where the job stopped, so run-log times never go back and the dirty window is waited
out once (issue 38, build 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.clock import FrozenClock, ReplayClock, SystemClock
from greentrain.events import read_events

SCRIPT = Path(__file__).parent / "gt_replay_relaunch.py"
STEPS = 40


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.timeout(150)
def test_a_relaunched_replay_continues_its_calendar_and_waits_each_window_once(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ELECTRICITYMAPS", "WATTTIME", "GREENTRAIN_"))}
    env.update(OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), str(STEPS)], capture_output=True, text=True,
                          timeout=140, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("finished")
    lines = (tmp_path / "steps.txt").read_text().splitlines()
    assert lines.count("start") == 2, "one checkpoint pause: one relaunch"
    steps = [line.split() for line in lines if line.startswith("step")]
    assert [int(s[1]) for s in steps] == list(range(STEPS)), "each step once"
    times = [_t(s[2]) for s in steps]
    assert times == sorted(times), "the relaunched calendar goes on from where it stopped"
    events = read_events(tmp_path / "run.jsonl")
    ends = [i for i, e in enumerate(events) if e["event"] == "summary"]  # the last event of each lifetime
    assert len(ends) == 2
    first, second = [_t(e["t"]) for e in events[: ends[0] + 1]], [_t(e["t"]) for e in events[ends[0] + 1:]]
    assert min(second) >= max(first), "run-log times never go back across the relaunch"
    pauses = [e for e in events if e["event"] == "action" and e["action"] == "pause"]
    assert len(pauses) == 1, "the dirty hour is waited out once"
    dirty = (datetime(2022, 10, 10, 1, tzinfo=UTC), datetime(2022, 10, 10, 2, tzinfo=UTC))
    assert not [t for t in times if dirty[0] + timedelta(minutes=10) <= t < dirty[1]], "no step in the dirty hour"


def test_catch_up_moves_a_simulated_clock_forward_only() -> None:
    t0 = datetime(2022, 1, 1, tzinfo=UTC)
    replay = ReplayClock(t0, speedup=3600)
    assert replay.catch_up(t0 + timedelta(hours=5))
    assert replay.now() >= t0 + timedelta(hours=5)
    assert not replay.catch_up(t0)
    assert replay.now() >= t0 + timedelta(hours=5), "never back"
    frozen = FrozenClock(t0)
    assert frozen.catch_up(t0 + timedelta(hours=1)) and frozen.now() == t0 + timedelta(hours=1)
    assert not frozen.catch_up(t0) and frozen.now() == t0 + timedelta(hours=1)
    wall = SystemClock()
    assert not wall.catch_up(wall.now() + timedelta(hours=1)), "wall time is never moved"
