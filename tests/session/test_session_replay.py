"""Done-when: a real CPU training loop, wrapped in a few lines, pauses and resumes around a high-carbon
window of a real replayed trace (CSV provider, ReplayClock at a large speed-up) without losing a step."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from gt_session_loop import make_model, reference_losses, train_step  # noqa: E402

from greentrain.clock import ReplayClock
from greentrain.events import read_events
from greentrain.session import Session
from greentrain.signals.trace import load_trace

ORIGIN = datetime(2022, 1, 12, 0, tzinfo=UTC)  # GB: a clean night, then a dirty morning
SPEEDUP = 36_000.0  # one trace hour per 0.1 s
STEPS = 240
PAD_S = 0.004  # each step takes at least 4 ms real = 144 s of trace time


@pytest.mark.timeout(120)
def test_real_loop_pauses_through_a_dirty_window_of_a_replayed_trace(shared_data: Path, tmp_path: Path) -> None:
    from greentrain.device import discover

    trace = shared_data / "carbon" / "GB_2022_hourly.csv"
    devices = discover()
    clock = ReplayClock(ORIGIN, speedup=SPEEDUP)
    losses: dict[int, list[float]] = {}
    lifetimes = 0
    while True:
        lifetimes += 1
        assert lifetimes <= 10
        torch.manual_seed(lifetimes)
        model, opt = make_model()
        # -- the few lines a user adds ------------------------------------------------------------
        with Session("forecast-optimal", zone="GB", provider=f"csv:{trace}", deadline=ORIGIN + timedelta(hours=30),
                     steps_total=STEPS, model=model, optimizer=opt, checkpoint_dir=tmp_path / "ckpt",
                     clock=clock, relaunch="none", devices=devices, jsonl=tmp_path / "run.jsonl",
                     progress=False, step_time_s=PAD_S * SPEEDUP) as session:
            for step in range(session.start_step, STEPS):
                loss = train_step(model, opt, step)
                time.sleep(PAD_S)
                losses.setdefault(step, []).append(loss.item())
                session.step(tokens=32, loss=loss)
                if session.should_stop:
                    break
        # ------------------------------------------------------------------------------------------
        if session.finished:
            break
    assert sorted(losses) == list(range(STEPS)) and all(len(v) == 1 for v in losses.values())
    assert [losses[i][0] for i in range(STEPS)] == reference_losses(STEPS)
    events = read_events(tmp_path / "run.jsonl")
    pauses = [e for e in events if e["event"] == "action" and e["action"] == "pause"]
    assert pauses and lifetimes == len(pauses) + 1
    finished_at = datetime.fromisoformat(events[-1]["t"].replace("Z", "+00:00"))
    assert finished_at <= ORIGIN + timedelta(hours=30)
    # The paused hours were dirtier than the hours the job ran in (the point of pausing).
    actual = {p.start: p.intensity_g_per_kwh for p in load_trace(trace)}
    running, paused = _hours_by_state(events)
    assert running and paused
    mean = lambda hours: sum(actual[h] for h in hours) / len(hours)  # noqa: E731
    assert mean(paused) > mean(running)
    summary = events[-1]
    assert summary["event"] == "summary" and summary["energy_j"] > 0


def _hours_by_state(events: list[dict]) -> tuple[set[datetime], set[datetime]]:
    """Trace hours touched while stepping vs. hours spent entirely in a pause."""
    running: set[datetime] = set()
    for e in events:
        if e["event"] == "step":
            t = datetime.fromisoformat(e["t"].replace("Z", "+00:00"))
            running.add(t.replace(minute=0, second=0, microsecond=0))
    states = [(datetime.fromisoformat(e["t"].replace("Z", "+00:00")), e["state"]) for e in events
              if e["event"] == "state"]
    paused: set[datetime] = set()
    for (t0, state), (t1, _next) in zip(states, states[1:], strict=False):
        if state in ("paused", "waiting"):
            hour = t0.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
            while hour + timedelta(hours=1) <= t1:
                paused.add(hour)
                hour += timedelta(hours=1)
    return running, paused - running
