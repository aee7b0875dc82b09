"""Multi-rank: rank 0 decides, every rank pauses at the same step (gloo, forked processes, 127.0.0.1)."""

from __future__ import annotations

import multiprocessing as mp
import sys
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_engine_doubles import (  # noqa: E402
    ClockMonitor,
    RunNowPolicy,
    ThresholdPolicy,
    TraceSignals,
    hourly,
)

from tests.ranks import free_port, run_ranks
from greentrain.engine import Collaborators, DeadlineGuard, Progress

T0 = datetime(2022, 1, 10, 0, tzinfo=UTC)
WORLD = 3
STEPS = 150
STEP_S = 60.0


def _rank_main(rank: int, port: int, out: mp.Queue) -> None:
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        from greentrain.clock import FrozenClock
        from greentrain.engine import Engine
        from greentrain.policies.base import Action
        from greentrain.engine.broadcast import TorchBroadcast

        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                                timeout=timedelta(seconds=60))
        torch.manual_seed(0)
        model = DDP(torch.nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        clock = FrozenClock(T0)
        if rank == 0:  # only rank 0 reads the carbon signal and runs the policy
            policy, signals = ThresholdPolicy(200), TraceSignals(hourly(T0, [100, 500, 500, 100, 100, 100]), clock)
        else:  # others would never pause on their own
            policy, signals = RunNowPolicy(), None
        engine = Engine(policy,
                        Collaborators(clock=clock, signals=signals, monitor=ClockMonitor(clock,
                                      power_w=100.0), broadcast=TorchBroadcast()),
                        progress=Progress(steps_total=STEPS, step_time_s=STEP_S),
                        deadline=DeadlineGuard(T0 + timedelta(hours=8), simulated=True),
                        decide_interval_s=120,
                        countdown=False)
        pauses = []
        engine.begin()
        gen = torch.Generator().manual_seed(rank)
        while not engine.finished:
            engine.step_begin()
            x = torch.randn(16, 8, generator=gen)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()  # DDP all-reduce: deadlocks if ranks disagree on pausing
            opt.step()
            clock.advance(STEP_S)
            decision = engine.step_end(loss=loss.detach())
            if decision.action != Action.RUN and not engine.finished:
                pauses.append((engine.progress.steps_done, decision.until.isoformat()))
                engine.wait_until(decision.until, decision.reason)
        engine.close()
        weights = [p.detach().clone() for p in model.parameters()]
        out.put((rank, pauses, engine.progress.steps_done, [w.tolist() for w in weights], clock.now().isoformat(),
                 engine.ledger.counterfactual_g, engine.ledger.emissions_g))
        dist.destroy_process_group()
    except BaseException:
        out.put((rank, "error", traceback.format_exc()))


@pytest.mark.timeout(90)
def test_all_ranks_pause_at_the_same_step() -> None:
    results = run_ranks(_rank_main, WORLD, free_port(), timeout_s=75)
    assert sorted(results) == list(range(WORLD))
    pauses = {r: results[r][1] for r in results}
    assert pauses[0], "rank 0 paused for the dirty hours"
    assert pauses[0][0][0] == 60 and pauses[0][0][1].startswith("2022-01-10T03:00")
    assert all(pauses[r] == pauses[0] for r in pauses)
    assert all(results[r][2] == STEPS for r in results)
    assert all(results[r][3] == results[0][3] for r in results), "replicas diverged"
    assert len({results[r][4] for r in results}) == 1
    # Every rank prices its own energy with rank 0's carbon signal: 150 one-minute steps at 100 W,
    # 60 in the clean first hour, 90 after the pause (all clean), none in the dirty hours.
    step_kwh = 100 * STEP_S / 3.6e6
    assert [results[r][6] for r in sorted(results)] == pytest.approx([150 * step_kwh * 100] * WORLD)

