"""A real tiny CPU training loop (dropout included, so RNG state matters) shared by the session tests."""

from __future__ import annotations

from datetime import datetime

import torch
from torch import nn

from greentrain.jobstats import JobState
from greentrain.policies.base import Action, Decision, Policy, Snapshot


def make_model() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Dropout(0.2), nn.Linear(32, 1))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 + step)  # data depends only on the step index
    x = torch.randn(32, 16, generator=gen)
    y = x[:, :1] * 0.5 - x[:, 1:2]
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()


def reference_losses(steps: int) -> list[float]:
    model, opt = make_model()
    return [train_step(model, opt, i).item() for i in range(steps)]


class PauseAtSteps(Policy):
    """Pauses (while running) after the given numbers of completed steps, for ``pause_s``."""

    name = "test-pause-at-steps"

    def __init__(self, steps: set[int], pause_s: float = 3600.0) -> None:
        self.steps = set(steps)
        self.pause_s = pause_s

    def decide(self, snapshot: Snapshot, now: datetime) -> Decision:
        from datetime import timedelta

        if snapshot.state == JobState.RUNNING and snapshot.steps_done in self.steps:
            return Decision(action=Action.PAUSE, until=now + timedelta(seconds=self.pause_s), reason="test pause")
        return Decision(action=Action.RUN)
