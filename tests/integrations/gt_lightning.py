"""The Lightning model the integration tests train: a seeded 8 → 16 → 1 regression MLP on the CPU."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import lightning.pytorch as L
import torch

__all__ = ["Regressor"]


class Regressor(L.LightningModule):
    """Weights seeded with 0; ``batches()`` gives the training batches of (x, y); ``optimizer`` is built with
    lr 1e-2; ``seen(output)`` (optional) is shown each step's output before the loss (a test records its dtype)."""

    def __init__(self, batches: Callable[[], Iterable[object]], *,
                 optimizer: type[torch.optim.Optimizer] = torch.optim.Adam,
                 seen: Callable[[torch.Tensor], None] | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        self._batches, self._optimizer, self._seen = batches, optimizer, seen

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        out = self.net(x)
        if self._seen is not None:
            self._seen(out)
        return torch.nn.functional.mse_loss(out.float(), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self._optimizer(self.parameters(), lr=1e-2)

    def train_dataloader(self) -> Iterable[object]:
        return self._batches()
