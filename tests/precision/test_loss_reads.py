"""A loss left on an accelerator is read on the host once per guard window (precision) and once per
``LOSS_LOG_EVERY_STEPS`` (the run log), never at every step: each read waits for the device."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from gt_engine_doubles import RunNowPolicy  # noqa: E402

from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators
from greentrain.engine import Engine
from greentrain.engine.jobsummary import LOSS_LOG_EVERY_STEPS
from greentrain.events import EventLog, read_events
from greentrain.precision import PrecisionConfig, PrecisionController
from greentrain.profiler import LocalCollective

pytestmark = pytest.mark.timeout(60)


class DeviceLoss(torch.Tensor):
    """A scalar that says it lives on an accelerator; every copy of it to the host is counted (a sync there)."""

    host_reads = 0

    @staticmethod
    def __new__(cls, value: float) -> DeviceLoss:
        return torch.Tensor._make_subclass(cls, torch.tensor(float(value)))

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", 0)

    def item(self) -> Any:
        DeviceLoss.host_reads += 1
        return super().item()

    def tolist(self) -> Any:
        DeviceLoss.host_reads += 1
        return super().tolist()

    def __float__(self) -> float:
        DeviceLoss.host_reads += 1
        return float(self.as_subclass(torch.Tensor).item())


@pytest.fixture(autouse=True)
def _count_from_zero() -> None:
    DeviceLoss.host_reads = 0


def test_the_guard_reads_a_device_loss_once_per_window_and_sees_the_same_values() -> None:
    config = PrecisionConfig(warmup_steps=1, trial_steps=4, guard_window=5, loss_tolerance=0.2)
    on_device = PrecisionController(("fp32", "bf16"), config=config, collective=LocalCollective())
    on_host = PrecisionController(("fp32", "bf16"), config=config, collective=LocalCollective())
    cost = {"fp32": 10.0, "bf16": 6.0}
    for step in range(40):
        value = 2.0 - 0.01 * step if step < 25 else 9.0  # diverges under bf16: the guard must still see it
        a = on_device.on_step_end(DeviceLoss(value), step_energy_j=cost[on_device.current], step_time_s=0.1)
        b = on_host.on_step_end(value, step_energy_j=cost[on_host.current], step_time_s=0.1)
        assert a == b
    assert on_device.banned == on_host.banned == {"bf16"}
    assert DeviceLoss.host_reads == 40 // config.guard_window


def test_the_run_log_reads_a_device_loss_every_tenth_step_and_a_number_at_every_step(tmp_path: Path) -> None:
    clock = FrozenClock(datetime(2026, 1, 1, tzinfo=UTC))
    log_path = tmp_path / "run.jsonl"
    engine = Engine(RunNowPolicy(), Collaborators(clock=clock, event_log=EventLog(log_path)), countdown=False)
    engine.begin()
    for step in range(25):
        engine.step_begin()
        engine.step_end(tokens=1, loss=DeviceLoss(3.0) if step < 20 else 1.5)
    engine.close()
    steps = [e for e in read_events(log_path) if e["event"] == "step"]
    logged = [e["step"] for e in steps if "loss" in e]
    assert logged == [LOSS_LOG_EVERY_STEPS, 2 * LOSS_LOG_EVERY_STEPS, 21, 22, 23, 24, 25]
    assert DeviceLoss.host_reads == 2
