"""Step metrics without a host sync per step: loss and grad norm stay on the device until fetched.

Reading a CUDA tensor's value (``float(loss)``) waits for every queued kernel,
so a loop that logs each step cannot run ahead of the GPU. The trainer instead
keeps each step's loss and pre-clip gradient norm as device tensors and hands
them here; every ``fetch_every`` steps (and whenever someone needs the values:
a hook, a checkpoint, the end of the run) one stacked copy brings them all to
the host. The values are the same floats a synchronous read gives.

Without a sync per step, host wall time per step says little on a GPU (the
host runs ahead), so there the steps of a fetch window share the window's wall
time, measured up to the fetch's own sync: the mean is exact, per-step jitter
inside the window is not seen. On the CPU nothing is asynchronous and each
step keeps its own wall time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from greentrain.runtime.metrics import StepMetrics
from greentrain.runtime.router_stats import RouterSummary

__all__ = ["MetricsFetcher", "fetch_interval"]


def fetch_interval(configured: int | None, device: torch.device) -> int:
    """Steps per fetch: as configured, else 10 on a GPU and 1 on the CPU (where a read waits for nothing)."""
    if configured is not None:
        return configured
    return 10 if device.type == "cuda" else 1


@dataclass(slots=True)
class _Pending:
    metrics: StepMetrics
    loss: torch.Tensor
    grad_norm: torch.Tensor
    extra: torch.Tensor | None = None


class MetricsFetcher:
    """Collects steps whose loss/grad norm are still device tensors; ``fetch()`` resolves them in one copy."""

    def __init__(self, every: int, device: torch.device) -> None:
        self.every = every
        self.device = device
        self._pending: list[_Pending] = []
        self._window_start_s: float | None = None
        self.fetches = 0
        """Number of host reads so far (one per fetch, whatever the steps in it)."""

    def __len__(self) -> int:
        return len(self._pending)

    def push(self, metrics: StepMetrics, loss: torch.Tensor, grad_norm: torch.Tensor, started_s: float,
             extra: torch.Tensor | None = None) -> None:
        """Add one finished step (``metrics.loss``/``grad_norm`` are placeholders until fetched).

        ``extra``: the step's packed router statistics (``RouterStats.summarise``), read in the same copy.
        """
        if not self._pending:
            self._window_start_s = started_s
        self._pending.append(_Pending(metrics, loss.detach().reshape(()).float(),
                                      grad_norm.detach().reshape(()).float(),
                                      None if extra is None else extra.detach().float().reshape(-1)))

    def due(self) -> bool:
        """True when ``every`` steps wait to be read."""
        return len(self._pending) >= self.every

    def fetch(self) -> list[StepMetrics]:
        """Resolve every pending step with one device-to-host copy (the only sync); oldest first."""
        if not self._pending:
            return []
        flat = [t.reshape(-1) for p in self._pending for t in (p.loss, p.grad_norm, p.extra) if t is not None]
        values = torch.cat(flat).tolist()
        end_s = time.perf_counter()
        self.fetches += 1
        pending, self._pending = self._pending, []
        share_s = None
        if self.device.type == "cuda" and self._window_start_s is not None:
            share_s = (end_s - self._window_start_s) / len(pending)
        out = []
        at = 0
        for p in pending:
            m = replace(p.metrics, loss=values[at], grad_norm=values[at + 1])
            at += 2
            if p.extra is not None:
                router = RouterSummary.from_packed(values[at:at + p.extra.numel()], p.extra.numel() - 2)
                at += p.extra.numel()
                m = replace(m, aux_loss=router.aux_loss, expert_imbalance=router.imbalance,
                            expert_tokens=router.tokens_per_expert)
            if share_s is not None and share_s > 0:
                scale = m.step_time_s / share_s
                m = replace(m, step_time_s=share_s, tokens_per_s=m.tokens / share_s,
                            mfu=None if m.mfu is None else m.mfu * scale)
            out.append(m)
        return out
