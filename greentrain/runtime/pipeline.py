"""Pipeline parallelism with ``torch.distributed.pipelining``: the pipeline builder.

The meta-device model is cut into ``pp × v`` stages of contiguous blocks
(``v`` virtual stages per rank for interleaved 1F1B, else 1); a stage is a deep
copy of the model with the other blocks deleted, so parameter names stay
global and checkpoints reshard across pipeline layouts. Each stage is wrapped
in :class:`TimedStage`, which measures forward and backward compute per step:
the numbers the stage-clock planner needs to slow down stages that wait.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import torch
from torch import nn
from torch.distributed import ProcessGroup
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import (
    PipelineScheduleMulti,
    PipelineScheduleSingle,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
)

from greentrain.errors import ConfigError

if TYPE_CHECKING:
    from greentrain.runtime.model import Transformer

__all__ = ["TimedStage", "PipelinePlan", "PipelineSchedule", "split_layers", "stage_ids_for_rank",
           "build_stage_modules", "build_schedule"]


PipelineSchedule: TypeAlias = PipelineScheduleSingle | PipelineScheduleMulti
"""GPipe or 1F1B (one stage per rank), or interleaved 1F1B (several)."""


class TimedStage(PipelineStage):
    """A PipelineStage that accumulates its forward and backward compute time (seconds) per microbatch.

    With ``sync_device`` the device is synchronised around each chunk so GPU
    kernels are inside the measurement (exact, but it stalls the pipeline:
    turn it on for profiling steps only).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sync_device = False
        self.recording: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
        """Wraps each real forward chunk (the trainer counts MoE routing there, not in shape inference)."""
        self.reset_times()

    def reset_times(self) -> None:
        self.forward_s = self.backward_s = 0.0
        self.forward_chunks = self.backward_chunks = 0

    def _sync(self) -> None:
        if self.sync_device and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def forward_one_chunk(self, *args, **kwargs):  # type: ignore[override]
        self._sync()
        start = time.perf_counter()
        try:
            with self.recording():
                return super().forward_one_chunk(*args, **kwargs)
        finally:
            self._sync()
            self.forward_s += time.perf_counter() - start
            self.forward_chunks += 1

    def backward_one_chunk(self, *args, **kwargs):  # type: ignore[override]
        self._sync()
        start = time.perf_counter()
        try:
            return super().backward_one_chunk(*args, **kwargs)
        finally:
            self._sync()
            self.backward_s += time.perf_counter() - start
            self.backward_chunks += 1

    def mean_times_s(self) -> tuple[float, float]:
        """(forward, backward) seconds per microbatch since the last reset."""
        return self.forward_s / max(1, self.forward_chunks), self.backward_s / max(1, self.backward_chunks)


@dataclass(frozen=True, slots=True)
class PipelinePlan:
    """Which blocks each stage holds and which stages this rank runs."""

    n_stages: int
    layers_per_stage: tuple[tuple[int, ...], ...]
    local_stage_ids: tuple[int, ...]


def split_layers(n_layers: int, n_stages: int) -> list[list[int]]:
    """Contiguous, as-even-as-possible split (earlier stages take the remainder)."""
    if n_layers < n_stages:
        raise ConfigError(f"model.n_layers={n_layers} is fewer than the {n_stages} pipeline stages; "
                          "add layers or lower --pp / parallel.virtual_stages")
    base, extra = divmod(n_layers, n_stages)
    out, start = [], 0
    for s in range(n_stages):
        size = base + (1 if s < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out


def stage_ids_for_rank(pp_rank: int, pp: int, schedule: str, virtual_stages: int) -> list[int]:
    """Loop-style placement: rank r runs stages r, r+pp, r+2pp, ... (interleaved) or just r."""
    v = virtual_stages if schedule == "interleaved" else 1
    return [pp_rank + i * pp for i in range(v)]


def plan_pipeline(n_layers: int, pp: int, pp_rank: int, schedule: str, virtual_stages: int,
                  microbatches: int, local_batch: int) -> PipelinePlan:
    """Validate the pipeline options and place stages."""
    v = virtual_stages if schedule == "interleaved" else 1
    n_stages = pp * v
    if schedule in ("1f1b", "interleaved") and microbatches < pp:
        raise ConfigError(f"--microbatches {microbatches}: the {schedule} schedule needs at least --pp={pp}")
    if schedule == "interleaved" and microbatches % pp:
        raise ConfigError(f"--microbatches {microbatches}: interleaved 1F1B needs a multiple of --pp={pp}")
    if local_batch % microbatches:
        raise ConfigError(f"--microbatches {microbatches}: must divide the per-rank batch of {local_batch} sequences")
    layers = tuple(tuple(x) for x in split_layers(n_layers, n_stages))
    return PipelinePlan(n_stages, layers, tuple(stage_ids_for_rank(pp_rank, pp, schedule, virtual_stages)))


def build_stage_modules(model: Transformer, plan: PipelinePlan) -> list[Transformer]:
    """Deep-copy the (meta) model once per local stage, keeping only that stage's parts."""
    parts = []
    for stage_id in plan.local_stage_ids:
        part = copy.deepcopy(model)
        keep = {str(i) for i in plan.layers_per_stage[stage_id]}
        for key in list(part.layers.keys()):
            if key not in keep:
                del part.layers[key]
        if stage_id != 0:
            part.tok_embeddings = None
        if stage_id != plan.n_stages - 1:
            part.norm = None
            part.output = None
        parts.append(part)
    return parts


def build_schedule(parts: Sequence[nn.Module], plan: PipelinePlan, *, schedule: str, microbatches: int,
                   device: torch.device, group: ProcessGroup, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                   ) -> tuple[PipelineSchedule, list[TimedStage]]:
    """Wrap each local part in a TimedStage and build the named schedule."""
    stages = [TimedStage(part, stage_id, plan.n_stages, device, group=group)
              for part, stage_id in zip(parts, plan.local_stage_ids)]
    sched: PipelineSchedule
    if schedule == "interleaved":
        sched = ScheduleInterleaved1F1B(list(stages), n_microbatches=microbatches, loss_fn=loss_fn, scale_grads=True)
    else:
        cls = ScheduleGPipe if schedule == "gpipe" else Schedule1F1B
        sched = cls(stages[0], n_microbatches=microbatches, loss_fn=loss_fn, scale_grads=True)
    assert isinstance(sched, PipelineScheduleMulti) == (schedule == "interleaved")
    return sched, stages
