"""Batches on the device ahead of time: pinned memory, non-blocking copies, a prefetch of the next step.

``Prefetcher.get(step)`` returns exactly ``StepBatches.batch(step)`` on the
training device. While step ``s`` trains, a background thread already builds
the host batch of step ``s + 1`` (byte windows gathered on the CPU) and pins
it; ``get(s + 1)`` then only enqueues an asynchronous host-to-device copy. A
request for any other step (a resume, a rewind) discards the speculative batch
and builds the requested one, so what a step sees depends on the step alone,
as before (resume exactness). On the CPU no copy happens at all.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import torch

from greentrain.runtime.data import StepBatches

__all__ = ["Prefetcher"]


class Prefetcher:
    """Device batches of a :class:`StepBatches`, one step ahead."""

    def __init__(self, batches: StepBatches, device: torch.device, *, enabled: bool = True) -> None:
        self.batches = batches
        self.device = device
        # Pinning needs an accelerator; on a CPU-only host it raises.
        self.pin = device.type == "cuda" and torch.cuda.is_available()
        self.enabled = enabled
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gt-prefetch") if enabled else None
        self._ahead: tuple[int, Future] | None = None
        self.hits = 0
        """Steps served from the prefetched batch (a diagnostic for tests and benchmarks)."""

    def _host(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, labels = self.batches.batch(step)
        if self.pin:
            inputs, labels = inputs.pin_memory(), labels.pin_memory()
        return inputs, labels

    def get(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, labels) of 0-based optimizer step ``step`` on the device; starts building ``step + 1``."""
        host = None
        if self._ahead is not None:
            ahead_step, future = self._ahead
            self._ahead = None
            if ahead_step == step:
                host = future.result()
                self.hits += 1
            else:
                if not future.cancel():  # already running: wait, the corpus' permutation cache is not shared
                    future.exception()
        if host is None:
            host = self._host(step)
        if self._pool is not None:
            self._ahead = (step + 1, self._pool.submit(self._host, step + 1))
        if self.device.type == "cpu":
            return host
        return tuple(t.to(self.device, non_blocking=self.pin) for t in host)  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the background thread (drops any speculative batch)."""
        if self._ahead is not None:
            self._ahead[1].cancel()
            self._ahead = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
