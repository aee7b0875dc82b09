"""The runtime under a real greentrain Session: decisions at step boundaries, pause = checkpoint, no lost step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.clock import ReplayClock
from greentrain.policies.base import Action, Decision, Policy, Snapshot
from greentrain.runtime.checkpoint import latest_step
from greentrain.runtime.greentrain_hooks import run_training
from greentrain.signals.base import IntensityPoint, Kind

from .harness import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class _Script(Policy):
    """Precision bf16 after step 1, a pause after step 2, run otherwise: a policy with a known script."""

    name = "script"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        self.calls.append(snapshot.steps_done)
        if snapshot.steps_done == 1:
            return Decision(precision="bf16", reason="test: cheaper precision")
        if snapshot.steps_done == 2 and snapshot.state.value == "running":
            return Decision(action=Action.PAUSE, until=now + timedelta(hours=1), reason="test: dirty hour")
        return Decision(reason="test: run")


class _FlatGrid:
    """A carbon signal (SignalChain shape) at 200 g/kWh now, with a forecast that varies (a constant signal never
    lets the engine wait, ``policies/worth.py``): the policy script decides, not the grid."""

    def __init__(self, clock: ReplayClock) -> None:
        self.clock = clock

    def latest(self) -> IntensityPoint:
        start = self.clock.now().replace(minute=0, second=0, microsecond=0)
        return IntensityPoint(start=start, end=start + timedelta(hours=1), intensity_g_per_kwh=200.0,
                              kind=Kind.ACTUAL, provider="test", zone="GB")

    def forecast(self, horizon_h: float = 24) -> list[IntensityPoint]:
        start = self.clock.now().replace(minute=0, second=0, microsecond=0)
        return [IntensityPoint(start=start + timedelta(hours=h), end=start + timedelta(hours=h + 1),
                               intensity_g_per_kwh=200.0 - 100.0 * (h % 2), kind=Kind.FORECAST, provider="test",
                               zone="GB") for h in range(1, int(horizon_h) + 1)]

    def status(self) -> None:
        return None


def _session_kwargs(policy: Policy) -> dict:
    clock = ReplayClock(datetime(2022, 6, 1, tzinfo=UTC), speedup=1.0)
    return dict(policy=policy, clock=clock, provider=_FlatGrid(clock), decide_interval_s=1e-6, devices=False,
                relaunch="none", pause_mode="checkpoint")


@pytest.mark.timeout(120)
def test_policy_pause_checkpoints_and_relaunch_resumes(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    cfg = tiny_config(parallel={"dp_shard": 1}, train={"steps": 4},
                      checkpoint={"dir": str(folder), "interval": 100},
                      greentrain={"zone": "GB"})
    policy = _Script()
    trainer, first = run_training(cfg, session_kwargs=_session_kwargs(policy))
    assert [m.step for m in first] == [1, 2], "the pause after step 2 stops the loop"
    assert [m.precision for m in first] == ["fp32", "bf16"], "the decision after step 1 applies to step 2"
    assert latest_step(folder) == 2, "a checkpoint-mode pause saves before stopping"
    assert 1 in policy.calls and 2 in policy.calls

    # The relaunch (here: a new call) resumes from the pause checkpoint and finishes.
    _, second = run_training(cfg, session_kwargs=_session_kwargs(_Script()))
    assert [m.step for m in second] == [3, 4]
    assert latest_step(folder) == 4


def _ranked_run(rank: int, world: int, folder: str):
    cfg = tiny_config(parallel={"dp_shard": 2}, train={"steps": 4},
                      checkpoint={"dir": folder, "interval": 100}, greentrain={"zone": "GB"})
    policy = _Script()
    trainer, history = run_training(cfg, session_kwargs=_session_kwargs(policy))
    return [(m.step, m.precision, m.loss) for m in history], len(policy.calls)


@pytest.mark.timeout(120)
def test_rank0_decides_and_every_rank_acts_at_the_same_step(tmp_path: Path) -> None:
    from .harness import run_ranks

    (hist0, calls0), (hist1, calls1) = run_ranks(_ranked_run, 2, str(tmp_path / "ckpt"), timeout_s=100)
    assert hist0 == hist1, "same steps, same precision switch, same losses on both ranks"
    assert [(s, p) for s, p, _ in hist0] == [(1, "fp32"), (2, "bf16")]
    assert calls0 > 0 and calls1 == 0, "only rank 0 consults the policy; rank 1 receives the decision"
    assert latest_step(tmp_path / "ckpt") == 2
