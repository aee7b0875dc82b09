"""The hybrid-parallel trainer: one optimizer step at a time, greentrain at every step boundary.

``Trainer(cfg)`` builds the mesh, model parts, optimizers, data and
checkpointer for this rank (the process group, if any, must already be
initialised, e.g. by ``torchrun``). ``fit()`` resumes from the newest complete
checkpoint, trains to ``train.steps``, checkpoints every ``interval`` steps and
at the end, and after each step hands ``(step, tokens, loss)`` to an optional
hook (the greentrain session), which may switch precision or stop the run
after a checkpoint (pause) — a relaunch continues with no lost step.

Per step nothing waits for the device: batches come prefetched
(``Prefetcher``), and loss and gradient norm stay on the device until the
``MetricsFetcher`` reads them, every ``metrics.fetch_every`` steps and at
checkpoint steps. The hook gets each step's loss as a device tensor and reads
it only when it needs a value (the session: once per precision-guard window).
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from greentrain.errors import ConfigError
from greentrain.runtime.autolayout import EnergyMeter, choose_layout
from greentrain.runtime.builder import build, cross_entropy, pick_device
from greentrain.runtime.checkpoint import Checkpointer
from greentrain.runtime.clip import clip_grad_norm_
from greentrain.runtime.config import PRECISIONS, JobConfig
from greentrain.runtime.cp import load_balanced_positions
from greentrain.runtime.data import ByteCorpus, StepBatches, load_corpus
from greentrain.runtime.deferred import MetricsFetcher, fetch_interval
from greentrain.runtime.fsdp import DTYPES, set_fsdp_precision
from greentrain.runtime.metrics import MetricsWriter, StepMetrics, flops_per_token, peak_flops
from greentrain.runtime.parallel_dims import ParallelDims
from greentrain.runtime.prefetch import Prefetcher
from greentrain.runtime.router_stats import RouterStats, set_aux_grad_scale

if TYPE_CHECKING:
    from greentrain.policies.base import Decision

__all__ = ["Trainer", "StepHook"]


class StepHook(Protocol):
    """What the trainer calls at each step boundary (on every rank, in step)."""

    @property
    def should_stop(self) -> bool:
        """Checkpoint and stop after this step (a plain attribute does)."""
        ...

    def on_step_end(self, step: int, tokens: int, loss: torch.Tensor | float) -> Decision | None:
        """Return a Decision (or None); may set ``should_stop``. ``loss`` may still be on the device:
        reading it waits for the step to finish there."""


def _fsdp_unit(model: torch.nn.Module) -> FSDPModule:
    """``model`` as the FSDP unit ``fully_shard`` made it (it swaps the class in place)."""
    if not isinstance(model, FSDPModule):
        raise RuntimeError(f"Trainer: FSDP is on but the model part is a plain {type(model).__name__}")
    return model


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


class Trainer:
    """Trains the reference transformer on the configured mesh."""

    def __init__(self, cfg: JobConfig, *, hook: StepHook | None = None,
                 on_step: Callable[[StepMetrics], None] | None = None, layout_meter: EnergyMeter | None = None) -> None:
        """``layout_meter``: what ``parallel.mesh = "auto"`` measures its trial layouts with (default:
        ``autolayout.default_meter``, this node's energy counters or the ranks' CPU time)."""
        self.cfg = cfg
        self.hook = hook
        self.on_step = on_step
        distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if distributed else 0
        world_size = dist.get_world_size() if distributed else 1
        self.device = pick_device(cfg.train.device)
        cfg, self.plan = choose_layout(cfg, world_size, self.device.type, type(self), layout_meter)
        self.cfg = cfg
        par = cfg.parallel
        self.dims = ParallelDims(dp_replicate=par.dp_replicate, dp_shard=par.dp_shard, tp=par.tp, pp=par.pp,
                                 cp=par.cp, ep=par.ep, world_size=world_size)
        if self.dims.distributed:
            self.dims.build_mesh(self.device.type)
        local_batch = cfg.train.global_batch // self.dims.dp if cfg.train.global_batch % self.dims.dp == 0 else 0
        if local_batch == 0 or local_batch % cfg.train.grad_accum:
            raise ConfigError(f"train.global_batch={cfg.train.global_batch} must divide by data-parallel size "
                              f"{self.dims.dp} × train.grad_accum {cfg.train.grad_accum}")
        self.local_batch = local_batch
        self.precision = "fp32"
        ga = cfg.train.grad_accum
        self.built = build(cfg, self.dims, self.device, local_batch, lambda p, y: cross_entropy(p, y) / ga)
        self.uses_fsdp = self.dims.dp_enabled
        self.set_precision(cfg.train.dtype)
        self.router_stats = RouterStats(self.built.parts, cfg.model.n_layers, cfg.model.n_experts)
        set_aux_grad_scale(self.built.parts, cfg.model.aux_loss_coef / ga)
        for stage in self.built.stages:
            stage.recording = self.router_stats.recording
        corpus = ByteCorpus(load_corpus(cfg.data.source, cfg.data.max_bytes), cfg.train.seq_len, cfg.train.seed)
        positions = (load_balanced_positions(cfg.train.seq_len, self.dims.cp, self.dims.cp_rank())
                     if self.dims.cp_enabled else None)
        self.batches = StepBatches(corpus, cfg.train.global_batch, self.dims.dp_rank(), self.dims.dp, positions)
        self.prefetcher = Prefetcher(self.batches, self.device)
        self.fetcher = MetricsFetcher(fetch_interval(cfg.metrics.fetch_every, self.device), self.device)
        self.checkpointer = (Checkpointer(cfg.checkpoint.dir, self.built.parts, self.built.optimizers,
                                          async_save=cfg.checkpoint.async_save, keep=cfg.checkpoint.keep)
                             if cfg.checkpoint.dir else None)
        self.step = 0
        self.tokens_total = 0
        self.tokens_per_step = cfg.train.global_batch * cfg.train.seq_len
        self._saved_step = -1
        self._stop_requested = False
        self._sync_timing = False
        self._stage_times: list[tuple[float, float]] = []
        self._flops_per_token = flops_per_token(cfg.model, cfg.train.seq_len)
        name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        self.device_name = name
        """The device's name ('NVIDIA H100 80GB HBM3', or 'cpu'): the MFU estimate's peak."""
        self.rescale_to: int | None = None
        """Carbon scaling: the replica count to relaunch at after ``fit`` (None: no change; set by
        ``run_training``)."""
        self.deadline_exit_code = 0
        """3 after a late finish under a strict deadline (set by ``run_training``), else 0."""

    # ---- contracts used by the engine ----------------------------------------
    def set_precision(self, dtype_name: str) -> None:
        """Switch compute precision at a step boundary (call on all ranks together)."""
        if dtype_name not in PRECISIONS:
            raise ConfigError(f"precision {dtype_name!r} is not one of {', '.join(PRECISIONS)}")
        if self.uses_fsdp:
            for part in self.built.parts:
                set_fsdp_precision(part, dtype_name)
        allow_tf32 = dtype_name == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        torch.backends.cudnn.allow_tf32 = allow_tf32
        self.precision = dtype_name

    def stage_times_s(self) -> list[tuple[float, float]]:
        """Per local pipeline stage: (forward_s, backward_s) per microbatch in the last step.

        Without pipeline parallelism: one entry, per micro-step of gradient accumulation. This is what
        ``greentrain.stageclocks`` plans clocks from (see ``exact_stage_timing`` for GPU accuracy).
        """
        return list(self._stage_times)

    def exact_stage_timing(self, enabled: bool = True) -> None:
        """Synchronise the device around each timed chunk (exact GPU times; slower: profile steps only)."""
        self._sync_timing = enabled
        for stage in self.built.stages:
            stage.sync_device = enabled

    # ---- one step ---------------------------------------------------------
    def _autocast(self):
        # FSDP casts parameters itself (its mixed-precision policy); elsewhere autocast does it.
        if self.uses_fsdp or self.precision in ("fp32", "tf32"):
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=DTYPES[self.precision])

    def _loss_parallel(self):
        if self.dims.tp_enabled and self.cfg.parallel.loss_parallel:
            from torch.distributed.tensor.parallel import loss_parallel

            return loss_parallel()
        return contextlib.nullcontext()

    def _now(self) -> float:
        if self._sync_timing and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def forward_backward(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """One optimizer step's forward and backward over its micro-batches (no pipeline); the summed loss."""
        model, ga = self.built.parts[0], self.cfg.train.grad_accum
        fsdp = _fsdp_unit(model) if self.uses_fsdp else None
        total = torch.zeros((), device=self.device)
        fwd_s = bwd_s = 0.0
        for i, (x, y) in enumerate(zip(inputs.chunk(ga), labels.chunk(ga))):
            if fsdp is not None:
                fsdp.set_requires_gradient_sync(i == ga - 1)  # reduce gradients once per step
            t0 = self._now()
            with self._loss_parallel():
                with self._autocast(), self.router_stats.recording():
                    loss = cross_entropy(model(x), y) / ga
                t1 = self._now()
                loss.backward()
            fwd_s, bwd_s = fwd_s + t1 - t0, bwd_s + self._now() - t1
            total += _local(loss.detach())
        self._stage_times = [(fwd_s / ga, bwd_s / ga)]
        return total

    def _pipeline_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        built, plan, schedule = self.built, self.built.plan, self.built.schedule
        if plan is None or schedule is None:
            raise RuntimeError("Trainer._pipeline_step: the model was built without a pipeline plan")
        has_first, has_last = 0 in plan.local_stage_ids, plan.n_stages - 1 in plan.local_stage_ids
        total = torch.zeros((), device=self.device)
        for stage in built.stages:
            stage.reset_times()
        for x, y in zip(inputs.chunk(self.cfg.train.grad_accum), labels.chunk(self.cfg.train.grad_accum)):
            losses: list[torch.Tensor] = []
            target = y if has_last else None
            with self._loss_parallel(), self._autocast():
                if has_first:  # stages check input strides (torch 2.11): never hand them a strided view
                    schedule.step(x.contiguous(), target=target, losses=losses)
                else:
                    schedule.step(target=target, losses=losses)
            if has_last:
                total += torch.stack([_local(loss.detach()) for loss in losses]).mean()
        self._stage_times = [s.mean_times_s() for s in built.stages]
        return total

    def _global_loss(self, loss: torch.Tensor) -> torch.Tensor:
        # Collectives are enqueued on the device: no host sync here (the fetcher reads later).
        if self.dims.pp_enabled:
            dist.all_reduce(loss, group=self.dims.mesh["pp"].get_group())  # only the last stage is non-zero
        if self.dims.dp_enabled:  # every rank with other tokens: data, expert and context parallel
            dist.all_reduce(loss, group=self.dims.dp_cp_mesh().get_group())
            loss = loss / self.dims.dp_cp
        return loss

    def _router_summary(self) -> torch.Tensor | None:
        """This step's router statistics over all ranks, still on the device (None for a dense model)."""
        if not self.router_stats.enabled:
            return None
        groups = []
        if self.dims.pp_enabled:
            groups.append(self.dims.mesh["pp"].get_group())
        if self.dims.dp_enabled:
            groups.append(self.dims.dp_cp_mesh().get_group())
        return self.router_stats.summarise(self.device, groups)

    def lr_at(self, step: int) -> float:
        """Learning rate for 0-based step ``step``: linear warm-up, then the configured decay."""
        t = self.cfg.train
        if step < t.warmup_steps:
            return t.lr * (step + 1) / t.warmup_steps
        progress = (step - t.warmup_steps) / max(1, t.steps - t.warmup_steps)
        progress = min(progress, 1.0)
        if t.decay == "constant":
            scale = 1.0
        elif t.decay == "linear":
            scale = 1.0 - progress
        else:
            scale = 0.5 * (1.0 + math.cos(math.pi * progress))
        return t.lr * (t.min_lr_ratio + (1.0 - t.min_lr_ratio) * scale)

    def train_step(self) -> StepMetrics:
        """Run optimizer step ``self.step`` (0-based) and advance; returns its metrics (read synchronously)."""
        self._enqueue_step()
        return self.fetch_metrics()[-1]

    def fetch_metrics(self) -> list[StepMetrics]:
        """Read every step whose loss and grad norm are still on the device (one host sync), oldest first."""
        return self.fetcher.fetch()

    def _enqueue_step(self) -> torch.Tensor:
        """Run optimizer step ``self.step`` and advance, leaving its loss and grad norm on the device;
        returns the loss (on the device)."""
        start = time.perf_counter()
        inputs, labels = self.prefetcher.get(self.step)
        lr = self.lr_at(self.step)
        self.router_stats.start_step(self.device)
        for opt in self.built.optimizers:
            opt.zero_grad(set_to_none=True)
            for group in opt.param_groups:
                group["lr"] = lr
        local = self._pipeline_step(inputs, labels) if self.dims.pp_enabled else self.forward_backward(inputs, labels)
        pp_group = self.dims.mesh["pp"].get_group() if self.dims.pp_enabled else None
        norm = clip_grad_norm_(self.built.params, self.cfg.train.max_grad_norm, pp_group=pp_group)
        for opt in self.built.optimizers:
            opt.step()
        loss = self._global_loss(local)
        router = self._router_summary()
        elapsed = time.perf_counter() - start  # host time; on a GPU the fetcher replaces it by the window's
        tokens = self.tokens_per_step
        self.step += 1
        self.tokens_total += tokens
        peak = self.cfg.train.peak_flops or peak_flops(self.device_name, self.precision)
        mfu = tokens / elapsed * self._flops_per_token / (peak * self.dims.world_size) if peak else None
        metrics = StepMetrics(step=self.step, loss=math.nan, grad_norm=math.nan, lr=lr, tokens=tokens,
                              tokens_per_s=tokens / elapsed, step_time_s=elapsed, precision=self.precision, mfu=mfu)
        self.fetcher.push(metrics, loss, norm, start, extra=router)
        return loss

    def close(self) -> None:
        """Release the background threads (prefetch, async checkpoints) of a trainer that is done with."""
        self.prefetcher.close()
        if self.checkpointer is not None:
            self.checkpointer.close()

    # ---- checkpoints --------------------------------------------------------
    def save_checkpoint(self) -> None:
        """Save the state after ``self.step`` completed steps (collective)."""
        if self.checkpointer is None:
            raise ConfigError("a checkpoint was requested but no --checkpoint-dir / checkpoint.dir is set")
        self.checkpointer.save(self.step, {"step": self.step, "tokens": self.tokens_total,
                                           **self.batches.state_dict(self.step)})
        self._saved_step = self.step

    def resume(self) -> int:
        """Load the newest complete checkpoint, if any; returns the step to continue from."""
        if self.checkpointer is None:
            return self.step
        state = self.checkpointer.load()
        if state is not None:
            self.step, self.tokens_total = int(state["step"]), int(state["tokens"])
            self._saved_step = self.step
        return self.step

    # ---- the loop -----------------------------------------------------------
    def request_stop(self) -> None:
        """Checkpoint and stop at the next step boundary (safe to call from a signal handler)."""
        self._stop_requested = True

    def _stop_agreed(self) -> bool:
        # Signals reach ranks at different moments: agree (max over ranks) so all stop at one step.
        flag = torch.tensor([1.0 if self._stop_requested else 0.0], device=self.device)
        if self.dims.distributed:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    @contextlib.contextmanager
    def _signals(self, enabled: bool):
        if not enabled:
            yield
            return
        previous = {sig: signal.signal(sig, lambda *_: self.request_stop()) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def fit(self, steps: int | None = None, *, resume: bool = True, handle_signals: bool = False,
            ) -> list[StepMetrics]:
        """Resume (unless told not to), then train until ``steps`` (default ``train.steps``) or the hook stops us.

        With ``handle_signals``, SIGTERM/SIGINT (e.g. preemption) make every rank save a checkpoint at the
        next step boundary and return; a relaunch continues from it.
        """
        with self._signals(handle_signals):
            return self._fit(steps, resume, handle_signals)

    def _fit(self, steps: int | None, resume: bool, watch_signals: bool) -> list[StepMetrics]:
        total = self.cfg.train.steps if steps is None else steps
        interval = self.cfg.checkpoint.interval
        writer = MetricsWriter(self.cfg.metrics.jsonl) if self.cfg.metrics.jsonl and self.rank == 0 else None
        history: list[StepMetrics] = []
        if resume:
            self.resume()
        try:
            while self.step < total:
                loss = self._enqueue_step()
                stop = self._boundary(loss)  # the hook gets the device loss: no host sync here
                due = self.step % interval == 0 or self.step == total
                if not (due or stop or self.fetcher.due()):
                    continue
                for metrics in self.fetch_metrics():
                    history.append(metrics)
                    if writer is not None:
                        writer.write(metrics)
                    if self.on_step is not None:
                        self.on_step(metrics)
                if watch_signals:
                    stop = self._stop_agreed() or stop
                if self.checkpointer is not None and (due or stop) and self._saved_step != self.step:
                    self.save_checkpoint()
                if stop:
                    break
        finally:
            if writer is not None:
                writer.close()
            if self.checkpointer is not None:
                self.checkpointer.close()
        return history

    def _boundary(self, loss: torch.Tensor) -> bool:
        """Give the step just enqueued to the hook; apply its decision; True when the run should stop."""
        if self.hook is None:
            return False
        decision = self.hook.on_step_end(self.step, self.tokens_per_step, loss)
        precision = decision.precision if decision is not None else None
        if precision and precision != self.precision:
            self.set_precision(precision)
        return bool(self.hook.should_stop)
