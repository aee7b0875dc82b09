"""The device section of benchmarks/runtime.py: Trainer vs a plain compiled loop vs Hugging Face Llama.

Three contenders train the same shape on the same batches with the same
optimizer (fused AdamW where the device has it, betas 0.9/0.95, clip 1.0) and
precision (bf16 autocast), compiled with the same backend, all resident in
this one process:

- ``trainer``: greentrain's ``Trainer`` on a mesh of one (its fast path:
  whole-model compile, metrics fetched every ``metrics.fetch_every`` steps);
- ``plain``: what a user would write: ``torch.compile(model)`` of the same
  ``Transformer``, pinned non-blocking batch copies, no per-step sync;
- ``hf``: ``transformers.LlamaForCausalLM`` of the same shape (sdpa), compiled,
  when ``transformers`` is installed.

Blocks of ``steps`` steps run interleaved in rotating order, so drift in
clocks and temperature hits all alike. Each block ends with a device sync.
Reported per contender: median tokens/s, MFU (tokens/s × (6·N + attention
FLOPs) per token ÷ the device's dense peak at bf16, from the datasheet table
in greentrain.runtime.metrics; none for devices not in it) and energy per
token from NVML's total-energy counter read before and after each block
(read-only: no setter is ever called). Energy of blocks is the whole board's,
measured by the counter.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from greentrain.runtime.builder import cross_entropy, fused_supported
from greentrain.runtime.config import JobConfig
from greentrain.runtime.metrics import flops_per_token, peak_flops
from greentrain.runtime.model import Transformer, init_weights
from greentrain.runtime.trainer import Trainer

__all__ = ["Contender", "run_device_comparison", "EnergyCounter"]


class EnergyCounter:
    """NVML's total-energy counter for one GPU, read-only; ``None`` readings where there is none."""

    def __init__(self, device: torch.device) -> None:
        self._handle = None
        self.why_not = ""
        if device.type != "cuda":
            self.why_not = "not a CUDA device"
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            self._read = pynvml.nvmlDeviceGetTotalEnergyConsumption
        except Exception as e:  # noqa: BLE001 - no NVML, no counter: say so, do not guess
            self._handle, self.why_not = None, f"{type(e).__name__}: {e}"

    def read_j(self) -> float | None:
        """Joules since the driver loaded (the counter is in mJ and refreshes every ~100 ms on an H100)."""
        return None if self._handle is None else self._read(self._handle) / 1000.0


@dataclass
class Contender:
    """One training loop under test: ``run(n)`` trains ``n`` steps (the caller syncs after)."""

    name: str
    run: Callable[[int], None]
    tokens_per_step: int
    flops_per_token: float
    blocks: list[tuple[float, float | None]] = field(default_factory=list)
    """(seconds, joules or None) per timed block."""


def _trainer_contender(cfg: JobConfig) -> Contender:
    trainer = Trainer(cfg)

    def run(n: int) -> None:
        trainer.fit(trainer.step + n, resume=False)  # the real loop: deferred metrics, prefetch, hooks

    tokens = cfg.train.global_batch * cfg.train.seq_len
    return Contender("trainer", run, tokens, flops_per_token(cfg.model, cfg.train.seq_len))


def _adamw(params, device: torch.device, lr: float) -> torch.optim.Optimizer:
    impl = {"fused": True} if fused_supported(device) else {"foreach": True}
    return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), eps=1e-8, **impl)


def _plain_loop(name: str, model: torch.nn.Module, cfg: JobConfig, batches, device: torch.device,
                dtype: torch.dtype | None, logits: Callable, flops: float) -> Contender:
    opt = _adamw(model.parameters(), device, cfg.train.lr)
    step = [0]
    pin = device.type == "cuda"

    def one() -> None:
        x, y = batches.batch(step[0])
        if pin:
            x, y = x.pin_memory(), y.pin_memory()
        x, y = x.to(device, non_blocking=pin), y.to(device, non_blocking=pin)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = cross_entropy(logits(model, x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.max_grad_norm)
        opt.step()
        step[0] += 1

    def run(n: int) -> None:
        for _ in range(n):
            one()

    return Contender(name, run, cfg.train.global_batch * cfg.train.seq_len, flops)


def _hf_llama(cfg: JobConfig, device: torch.device) -> torch.nn.Module | None:
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        return None
    m = cfg.model
    hf_cfg = LlamaConfig(vocab_size=m.vocab_size, hidden_size=m.dim, intermediate_size=m.ffn_hidden,
                         num_hidden_layers=m.n_layers, num_attention_heads=m.n_heads,
                         num_key_value_heads=m.kv_heads, max_position_embeddings=m.max_seq_len,
                         rms_norm_eps=m.norm_eps, rope_theta=m.rope_theta, tie_word_embeddings=False,
                         attention_bias=False, mlp_bias=False, attn_implementation="sdpa")
    return LlamaForCausalLM(hf_cfg).to(device)


def run_device_comparison(cfg: JobConfig, *, steps: int, rounds: int, warmup: int, with_hf: bool = True,
                          log: Callable[[str], None] = print) -> dict[str, dict[str, float | None]]:
    """Interleaved blocks of every contender on ``cfg.train.device``; per contender its medians."""
    contenders = [_trainer_contender(cfg)]
    device = torch.device(cfg.train.device if cfg.train.device != "auto" else
                          ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    from greentrain.runtime.data import ByteCorpus, StepBatches, load_corpus

    corpus = ByteCorpus(load_corpus(cfg.data.source, cfg.data.max_bytes), cfg.train.seq_len, cfg.train.seed)
    trainer_batches = StepBatches(corpus, cfg.train.global_batch, 0, 1)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.train.dtype)
    model = Transformer(cfg.model).to(device)
    init_weights(model, cfg.model, cfg.train.seed, device)
    compiled = torch.compile(model, backend=cfg.train.compile_backend) if cfg.train.compile else model
    flops = flops_per_token(cfg.model, cfg.train.seq_len)
    contenders.append(_plain_loop("plain", compiled, cfg, trainer_batches, device, dtype,
                                  lambda mod, x: mod(x), flops))
    if with_hf:
        hf = _hf_llama(cfg, device)
        if hf is None:
            log("hf: not measured (transformers not installed)")
        else:
            hf_run = torch.compile(hf, backend=cfg.train.compile_backend) if cfg.train.compile else hf
            contenders.append(_plain_loop("hf", hf_run, cfg, trainer_batches, device, dtype,
                                          lambda mod, x: mod(input_ids=x).logits, flops))
    energy = EnergyCounter(device)
    if energy.why_not:
        log(f"energy per token: not measured ({energy.why_not})")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for c in list(contenders):  # compile and warm the caches outside the timed blocks
        try:
            c.run(warmup)
            sync()
        except Exception as e:  # noqa: BLE001 - a reference loop that fails must not cost the Trainer's figures
            if c.name in ("trainer", "plain"):
                raise
            log(f"{c.name}: not measured ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
            contenders.remove(c)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    for i in range(rounds):
        order = contenders[i % len(contenders):] + contenders[:i % len(contenders)]
        for c in order:
            sync()
            e0, t0 = energy.read_j(), time.perf_counter()
            c.run(steps)
            sync()
            t1, e1 = time.perf_counter(), energy.read_j()
            c.blocks.append((t1 - t0, None if e0 is None or e1 is None else e1 - e0))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = cfg.train.peak_flops or peak_flops(name, cfg.train.dtype)
    out: dict[str, dict[str, float | None]] = {}
    for c in contenders:
        tokens = steps * c.tokens_per_step
        tps = statistics.median(tokens / s for s, _ in c.blocks)
        joules = [j for _, j in c.blocks if j is not None]
        out[c.name] = {"tokens_per_s": tps, "mfu": tps * c.flops_per_token / peak if peak else None,
                       "mj_per_token": statistics.median(joules) / tokens * 1e3 if joules else None}
    base = out["plain"]["tokens_per_s"]
    for row in out.values():
        row["ratio_to_plain"] = row["tokens_per_s"] / base
    return out
