"""Done-when: a real CPU training loop, wrapped in a few lines, pauses and resumes around a high-carbon
window of a real replayed trace (CSV provider, ReplayClock at a large speed-up) without losing a step."""

from __future__ import annotations

from collections.abc import Callable

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_session_loop import make_model, reference_losses, train_step  # noqa: E402

from greentrain.clock import ReplayClock
from greentrain.events import read_events
from greentrain.session import Session
from greentrain.signals.trace import load_trace

# GB, 2022-10-10: ~57 g/kWh until 04:00, a morning peak of 103-129 (05:00-08:00), ~61-76 from 10:00.
ORIGIN = datetime(2022, 10, 10, 1, tzinfo=UTC)
SPEEDUP = 3600.0  # one trace hour per second
STEPS = 300
PAD_S = 0.01  # each step takes at least 10 ms real = 36 s of trace time: the job needs 3-6 trace hours
# The hint a user would give: the loop's real step time as run under a Session. At 3600x every real ms is
# 3.6 trace seconds, so the session's own work (hourly decisions, samples, the run log) counts; on 2 CPU
# cores a step took 14-20 ms real in all (50-72 trace seconds). A hint of the bare 10 ms let the plan
# start at 11:00 on a 3 h estimate of what was 6 h of work, and the deadline was missed by minutes.
STEP_HINT_S = 2 * PAD_S * SPEEDUP
DEADLINE = ORIGIN + timedelta(hours=16)


@pytest.mark.timeout(120)
def test_real_loop_pauses_through_a_dirty_window_of_a_replayed_trace(carbon_trace: Callable[[str], Path], tmp_path: Path) -> None:
    import torch.distributed  # noqa: F401  (slow imports happen before the replayed clock starts)

    from greentrain.device import discover
    from greentrain.signals import SignalChain, make_provider

    trace = carbon_trace("GB_2022_hourly.csv")
    devices = discover()
    expected = reference_losses(STEPS)  # also warms up torch's lazy imports (seconds = hours of trace)
    clock = ReplayClock(ORIGIN, speedup=SPEEDUP)
    # The CSV trace provider, read at the replayed clock's time (built once: parsing 8,760 rows takes a while).
    carbon = SignalChain([make_provider(f"csv:{trace}", clock=clock)], zone="GB", clock=clock)
    losses: dict[int, list[float]] = {}
    lifetimes = 0
    while True:
        lifetimes += 1
        assert lifetimes <= 10
        torch.manual_seed(lifetimes)
        model, opt = make_model()
        # -- the few lines a user adds ------------------------------------------------------------
        with Session("forecast-optimal", zone="GB", provider=carbon, deadline=DEADLINE,
                     steps_total=STEPS, model=model, optimizer=opt, checkpoint_dir=tmp_path / "ckpt",
                     clock=clock, relaunch="none", devices=devices, jsonl=tmp_path / "run.jsonl",
                     progress=False, step_time_s=STEP_HINT_S) as session:
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
    assert [losses[i][0] for i in range(STEPS)] == expected
    events = read_events(tmp_path / "run.jsonl")
    pauses = [e for e in events if e["event"] == "action" and e["action"] == "pause"]
    waits = [e for e in events if e["event"] == "action" and e["action"] in ("pause", "delay_start")]
    assert waits, "the policy held the job back from the dirty hours"
    assert lifetimes == len(pauses) + 1, "each checkpoint pause was one save / leave / resume"
    summary = [e for e in events if e["event"] == "summary"][-1]  # one per process lifetime
    finished_at = datetime.fromisoformat(summary["t"].replace("Z", "+00:00"))
    assert finished_at <= DEADLINE
    # The paused hours were dirtier than the hours the job ran in (the point of pausing).
    actual = {p.start: p.intensity_g_per_kwh for p in load_trace(trace)}
    running, paused = _hours_by_state(events)
    assert running and paused
    mean = lambda hours: sum(actual[h] for h in hours) / len(hours)  # noqa: E731
    assert mean(paused) > mean(running)
    assert summary["energy_j"] > 0 and summary["finished"]


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
