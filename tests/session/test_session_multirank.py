"""Session under torch.distributed (gloo, forked ranks): checkpoint pauses agree across ranks, nothing lost."""

from __future__ import annotations

import multiprocessing as mp
import sys
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.ranks import free_port, run_ranks

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE), str(HERE.parent / "engine")]

T0 = datetime(2022, 2, 1, 0, tzinfo=UTC)
WORLD = 2
STEPS = 30


def _train(rank: int, ckpt: Path, pauses: set[int] | None) -> tuple[list[tuple[int, float]], int, list]:
    import torch
    from gt_engine_doubles import RunNowPolicy, TraceSignals, hourly, varying
    from gt_session_loop import PauseAtSteps
    from torch.nn.parallel import DistributedDataParallel as DDP

    from greentrain.clock import FrozenClock
    from greentrain.session import Session

    clock = FrozenClock(T0)
    seen: list[tuple[int, float]] = []
    lifetimes = 0
    while True:
        lifetimes += 1
        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.2), torch.nn.Linear(16, 1)))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        torch.manual_seed(999 + lifetimes)  # a relaunched process has fresh RNG: the checkpoint must restore it
        # Ranks other than 0 get a policy that never pauses: only rank 0's decisions may count.
        policy = PauseAtSteps(pauses or set()) if rank == 0 else RunNowPolicy()
        signals = TraceSignals(hourly(T0, varying(200, 400)), clock)
        with Session(policy, provider=signals, steps_total=STEPS, model=model, optimizer=opt, checkpoint_dir=ckpt,
                     clock=clock, relaunch="none", devices=False, progress=False, decide_interval_s=1,
                     pause_mode="checkpoint", job=f"mr-{pauses is not None}") as session:
            for step in range(session.start_step, STEPS):
                gen = torch.Generator().manual_seed(rank * 1000 + step)
                x = torch.randn(8, 8, generator=gen)
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen.append((step, loss.item()))
                clock.advance(60)
                session.step(loss=loss.detach())
                if session.should_stop:
                    break
        if session.finished:
            return seen, lifetimes, [p.detach().tolist() for p in model.parameters()]


def _rank_main(rank: int, port: int, tmp: str, out: mp.Queue) -> None:
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                                timeout=timedelta(seconds=60))
        plain = _train(rank, Path(tmp) / "plain", None)
        paused = _train(rank, Path(tmp) / "paused", {7, 18, 19})
        out.put((rank, plain, paused))
        dist.destroy_process_group()
    except BaseException:
        out.put((rank, "error", traceback.format_exc()))


@pytest.mark.timeout(120)
def test_checkpoint_pauses_are_rank_consistent_and_lose_nothing(tmp_path: Path) -> None:
    results = run_ranks(_rank_main, WORLD, free_port(), str(tmp_path), timeout_s=100)
    for rank in range(WORLD):
        _, plain, paused = results[rank]
        assert plain[1] == 1 and paused[1] == 4, "three pauses -> four process lifetimes on every rank"
        assert [s for s, _ in paused[0]] == list(range(STEPS)), "each step once"
        assert paused[0] == plain[0], "losses bit-identical to the uninterrupted run"
        assert paused[2] == plain[2]
    assert results[0][2][2] == results[1][2][2], "replicas agree"
