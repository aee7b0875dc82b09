"""``--mesh auto``, measured: train a few steps on each candidate layout, keep the one that drew the least
energy per token.

``planner.plan_mesh`` lists every layout of the world (``pp × dp_replicate ×
dp_shard × cp × ep × tp``) that the model allows and that fits in memory,
cheapest first by its estimate. Each of them (or the ``parallel.auto_trials``
best by the estimate) is built and trained for one warm-up step (compilation,
allocator, first gathers) and ``parallel.auto_trial_steps`` measured steps:
side by side, step by step in turn, when they fit in memory together (a change
of load on the host then falls on all alike), else one after another. The
energy of every measured step is read from the job's devices
(``NodeEnergyMeter``: NVML or RAPL counters where they exist; on a host with
neither, ``ProcessCPUMeter``: the ranks' own CPU time at the host's TDP per
CPU, labelled estimated) and the layout with the lowest median energy per
token wins; the candidates within 25 % of the best after that pass are measured
again for twice as many steps, so noise does not decide a close race. Rank 0's
figures are shared, so every rank chooses the same. The
reason printed names the winner, what it measured, where the number came
from, and every trial beside it.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

import torch
import torch.distributed as dist

from greentrain.runtime.mesh_planner import LayoutEstimate, MeshPlan, apply_layout, resolve_auto_mesh

__all__ = ["EnergyMeter", "NodeEnergyMeter", "ProcessCPUMeter", "Trial", "choose_layout", "default_meter",
           "Samples", "measure_candidates", "measure_layouts", "trial_configs"]


class EnergyMeter(ABC):
    """Energy the whole job draws over a window; every rank gets the same ``(joules, source)``."""

    @abstractmethod
    def begin(self) -> None:
        """Start a window (collective: every rank calls it)."""

    @abstractmethod
    def end(self) -> tuple[float, str]:
        """Joules since ``begin`` over all ranks' devices, and where the figure came from."""

    def close(self) -> None:
        """Release what the meter holds."""


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _collective_device(device_type: str) -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device("cpu")


def _sum_over_ranks(value: float, device: torch.device) -> float:
    if not _distributed():
        return value
    total = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return float(total.item())


class NodeEnergyMeter(EnergyMeter):
    """Local rank 0 of each node measures the node with greentrain's ``Monitor``; the nodes are summed."""

    def __init__(self, device_type: str, devices=None) -> None:
        from greentrain.device import discover
        from greentrain.monitor import Monitor

        self.device = _collective_device(device_type)
        self.monitor = None
        if int(os.environ.get("LOCAL_RANK", "0")) == 0:
            self.monitor = Monitor.from_devices(devices or discover(), interval_s=0.1).start()

    def begin(self) -> None:
        if self.monitor is not None:
            self.monitor.begin("layout-trial")

    def end(self) -> tuple[float, str]:
        energy_j, source = 0.0, ""
        if self.monitor is not None:
            window = self.monitor.end("layout-trial")
            energy_j, source = window.energy_j, str(window.source)
        return _sum_over_ranks(energy_j, self.device), str(_share(source))

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()


class ProcessCPUMeter(EnergyMeter):
    """Where no device has an energy counter: each rank's process CPU time × the host's TDP per logical CPU
    (the TDP greentrain's CPU estimate uses), summed over the ranks. Unlike the host-wide estimate, what other
    processes on a shared host burn does not count; a rank waiting on a collective costs what it spins."""

    def __init__(self, device_type: str, tdp_w: float, cpus: int) -> None:
        self.device = _collective_device(device_type)
        self.watts_per_cpu = tdp_w / max(1, cpus)
        self._start_s = 0.0

    def begin(self) -> None:
        self._start_s = time.process_time()

    def end(self) -> tuple[float, str]:
        cpu_s = _sum_over_ranks(time.process_time() - self._start_s, self.device)
        return cpu_s * self.watts_per_cpu, f"estimated: process CPU time x {self.watts_per_cpu:.3g} W per CPU"


def default_meter(device_type: str) -> EnergyMeter:
    """Counters where the node has any (NVML GPUs, RAPL), else the job's own CPU time (``ProcessCPUMeter``)."""
    from greentrain.device import discover
    from greentrain.provenance import Source

    devices = discover()
    estimates = [c for c in devices.cpus if c.source == Source.ESTIMATED]
    if devices.gpus or len(estimates) < len(devices.cpus) or not estimates:
        return NodeEnergyMeter(device_type, devices)
    return ProcessCPUMeter(device_type, sum(getattr(c, "tdp_w", 0.0) for c in estimates) or 1.0,
                           os.cpu_count() or 1)


class _Trainable(Protocol):
    """What a trial needs of a trainer."""

    tokens_per_step: int

    def train_step(self) -> object: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Trial:
    """What one candidate layout measured."""

    layout: LayoutEstimate
    energy_per_token_j: float
    tokens_per_s: float
    source: str
    estimate_rank: int
    """Its place (1-based) in the estimate's ranking."""

    def describe(self) -> str:
        return (f"{self.layout.describe()}: {self.energy_per_token_j * 1e3:.4g} mJ/token ({self.source}), "
                f"{self.tokens_per_s:,.0f} tokens/s (estimate: #{self.estimate_rank}, "
                f"{self.layout.energy_per_token_j * 1e3:.3g} mJ/token)")


def _release(trainer: _Trainable) -> None:
    trainer.close()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _timed_step(trainer: _Trainable, meter: EnergyMeter) -> tuple[float, float, str]:
    """(joules, seconds, source) of one step; ``train_step`` reads its loss, so the step has finished."""
    meter.begin()
    start = time.perf_counter()
    trainer.train_step()
    seconds = time.perf_counter() - start
    energy_j, source = meter.end()
    return energy_j, seconds, source


@dataclass(slots=True)
class Samples:
    """One candidate's measured steps: joules per token and tokens/s of each, and where the energy came from."""

    per_token_j: list[float]
    tokens_per_s: list[float]
    source: str

    def energy(self) -> float:
        """Median joules per token."""
        return statistics.median(self.per_token_j)

    def speed(self) -> float:
        """Median tokens per second."""
        return statistics.median(self.tokens_per_s)

    def __add__(self, other: "Samples") -> "Samples":
        return Samples(self.per_token_j + other.per_token_j, self.tokens_per_s + other.tokens_per_s, other.source)


def _samples(trainer: _Trainable, steps: list[tuple[float, float, str]]) -> Samples:
    n = trainer.tokens_per_step
    return Samples([j / n for j, _, _ in steps], [n / s for _, s, _ in steps], steps[-1][2] if steps else "")


def measure_candidates(cfgs: list, make: Callable[[object], _Trainable], meter: EnergyMeter, steps: int, *,
                       together: bool) -> list[Samples]:
    """Per config, ``steps`` measured steps after one warm-up step.

    ``together``: build every candidate first and measure them step by step in turn (the order reversed
    every other step), so a change of load on the host during the trials falls on all of them alike;
    otherwise one after another, each released before the next is built (when they do not fit at once).
    """
    if not together:
        out = []
        for cfg in cfgs:
            trainer = make(cfg)
            try:
                trainer.train_step()  # warm-up: compilation, allocator, first gathers
                out.append(_samples(trainer, [_timed_step(trainer, meter) for _ in range(steps)]))
            finally:
                _release(trainer)
        return out
    steps_of: list[list[tuple[float, float, str]]] = [[] for _ in cfgs]
    trainers = [make(cfg) for cfg in cfgs]
    try:
        for trainer in trainers:
            trainer.train_step()
        for step in range(steps):
            order = list(range(len(cfgs)))
            for i in order if step % 2 == 0 else order[::-1]:
                steps_of[i].append(_timed_step(trainers[i], meter))
        return [_samples(trainer, got) for trainer, got in zip(trainers, steps_of)]
    finally:
        for trainer in trainers:
            _release(trainer)


REFINE_WITHIN = 1.25
"""Candidates within 25 % of the best after the first pass are measured again (their noise decides)."""
REFINE_AT_MOST = 4
"""... at most this many of them, for twice the trial steps, side by side as before."""


def _measure_and_refine(cfgs: list, make: Callable[[object], _Trainable], meter: EnergyMeter, steps: int,
                        together: bool) -> tuple[list[Samples], int]:
    """Every candidate for ``steps``; then the close contenders for ``2 × steps`` more. (figures, refined)."""
    figures: list[Samples] = _share(measure_candidates(cfgs, make, meter, steps, together=together))  # type: ignore
    order = sorted(range(len(cfgs)), key=lambda i: figures[i].energy())
    best = figures[order[0]].energy()
    close = [i for i in order[:REFINE_AT_MOST] if figures[i].energy() <= REFINE_WITHIN * best]
    if len(close) < 2:
        return figures, 0
    more: list[Samples] = _share(measure_candidates([cfgs[i] for i in close], make, meter, 2 * steps,  # type: ignore
                                                    together=together))
    for i, extra in zip(close, more):
        figures[i] = figures[i] + extra
    return figures, len(close)


def _share(value: object) -> object:
    """Rank 0's ``value`` on every rank (trials are timed per rank; all must choose alike)."""
    if not _distributed():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def trial_configs(cfg, layouts: list[LayoutEstimate], steps: int) -> list:
    """``cfg`` with each layout's sizes, no checkpoints or metrics files, enough steps for a trial."""
    base = cfg.replace("checkpoint", dir=None).replace("metrics", jsonl=None, port=None)
    base = base.replace("train", steps=max(base.train.steps, steps + 1))
    return [apply_layout(base, layout) for layout in layouts]


def measure_layouts(cfg, plan: MeshPlan, make: Callable[[object], _Trainable], meter: EnergyMeter, *,
                    trials: int | None, steps: int) -> MeshPlan:
    """Measure the ``trials`` best candidates of ``plan`` (None: all); a MeshPlan whose best is the lowest measured
    energy per token."""
    shortlist: list[LayoutEstimate] = _share(list(plan.candidates[:trials]))  # type: ignore[assignment]
    cfgs = trial_configs(cfg, shortlist, steps)
    # Side by side when all of them fit in memory at once (with room to spare), else one after another.
    together = sum(c.memory_gb for c in shortlist) <= 0.5 * plan.memory_gb
    figures, refined = _measure_and_refine(cfgs, make, meter, steps, together)
    measured = sorted((Trial(layout, f.energy(), f.speed(), f.source, rank)
                       for rank, (layout, f) in enumerate(zip(shortlist, figures), 1)),
                      key=lambda t: t.energy_per_token_j)
    best = measured[0]
    left = len(plan.candidates) - len(measured)
    runner_up = ""
    if len(measured) > 1:
        gap = measured[1].energy_per_token_j / best.energy_per_token_j - 1
        runner_up = f"; next {measured[1].layout.describe()}, {gap:+.1%}"
    unmeasured = f"{left} more that fit were ranked out by the estimate" if left else "every layout that fits"
    lines = [f"{best.layout.describe()}: the lowest measured energy per token, "
             f"{best.energy_per_token_j * 1e3:.4g} mJ ({best.source}), {best.tokens_per_s:,.0f} tokens/s, of "
             f"{len(measured)} layouts measured for {steps} steps each"
             f"{f' (the {refined} within {REFINE_WITHIN - 1:.0%} of the best: {2 * steps} more)' if refined else ''}"
             f"{runner_up}; {unmeasured}, "
             f"{len(plan.rejected)} rejected (model, batch or memory)"]
    lines += [f"  measured {t.describe()}" for t in measured]
    return replace(plan, best=best.layout, reason="\n".join(lines), trials=tuple(measured))


def choose_layout(cfg, world_size: int, device_type: str, make: Callable[[object], _Trainable],
                  meter: EnergyMeter | None = None):
    """For ``parallel.mesh = "auto"``: (a copy of ``cfg`` with the chosen sizes, the MeshPlan); else (cfg, None)."""
    if cfg.parallel.mesh != "auto":
        return cfg, None
    estimated_cfg, plan = resolve_auto_mesh(cfg, world_size, device_type)
    trials = cfg.parallel.auto_trials
    if trials == 0 or len(plan.candidates) == 1:
        why = "auto_trials = 0" if trials == 0 else "the only layout that fits"
        return estimated_cfg, replace(plan, reason=f"{plan.reason} (not measured: {why})")
    owned = meter is None
    meter = meter or default_meter(device_type)
    try:
        measured = measure_layouts(cfg, plan, make, meter, trials=trials, steps=cfg.parallel.auto_trial_steps)
    finally:
        if owned:
            meter.close()
    return apply_layout(cfg, measured.best), measured
