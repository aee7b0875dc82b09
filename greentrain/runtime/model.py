"""Reference decoder-only transformer: RMSNorm, rotary embeddings, SwiGLU.

Sizes go from a few thousand parameters (``tiny``) to ~1B by config. The model
is built on the meta device, parallelized, then materialised with
:func:`init_weights`, which draws every parameter from a generator seeded by
``(seed, parameter name)`` and copies in only this rank's shard: the weights
are identical whatever the mesh, so every layout is comparable with a
single-process run. Blocks live in a ``ModuleDict`` keyed by their index, so a
pipeline stage is the same model with other blocks deleted and parameter names
(and therefore checkpoints) stay global.
"""

from __future__ import annotations

import math
import zlib
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from greentrain.runtime.config import ModelConfig
from greentrain.runtime.moe import MoE

__all__ = ["Transformer", "TransformerBlock", "RMSNorm", "AttentionCore", "CausalAttention", "block_attention",
           "init_weights", "canonical_name", "count_params", "expert_params"]


class RMSNorm(nn.Module):
    """Root-mean-square layer norm with a learned scale."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rope_tables(head_dim: int, max_seq_len: int, theta: float, device: torch.device | None = None) -> torch.Tensor:
    """(max_seq_len, head_dim/2, 2) cos/sin table (real-valued: DTensor-friendly)."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_seq_len, device=device, dtype=torch.float32), freqs)
    return torch.stack((angles.cos(), angles.sin()), dim=-1)


def apply_rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of x (batch, seq, heads, head_dim) by position."""
    seq = x.shape[1]
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    cos = table[:seq, None, :, 0]
    sin = table[:seq, None, :, 1]
    out0 = pairs[..., 0] * cos - pairs[..., 1] * sin
    out1 = pairs[..., 0] * sin + pairs[..., 1] * cos
    return torch.stack((out0, out1), dim=-1).flatten(-2).type_as(x)


class AttentionCore(Protocol):
    """How the local tokens attend: where they sit in the sequence, and the attention itself."""

    graph_safe: bool
    """Whether ``torch.compile`` can take a block holding it as one graph (no eager collectives)."""

    def rope_rows(self, table: torch.Tensor, seq: int) -> torch.Tensor: ...

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_rep: int) -> torch.Tensor: ...


class CausalAttention:
    """The attention core on one device: the whole sequence is here, positions 0..seq-1.

    ``apply_cp`` swaps in a context-parallel core (``cp.py``) with the same two methods.
    """

    graph_safe = True

    def rope_rows(self, table: torch.Tensor, seq: int) -> torch.Tensor:
        """The rotary table rows of the local tokens' positions."""
        return table[:seq]

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_rep: int) -> torch.Tensor:
        """Causal attention of (batch, seq, heads, head_dim) tensors; kv heads repeated ``n_rep`` times."""
        if n_rep > 1:
            k = k.repeat_interleave(n_rep, dim=2)
            v = v.repeat_interleave(n_rep, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return out.transpose(1, 2)


class Attention(nn.Module):
    """Causal multi-head (optionally grouped-query) attention."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.head_dim = cfg.dim // cfg.n_heads
        self.n_rep = cfg.n_heads // cfg.kv_heads
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * self.head_dim, cfg.dim, bias=False)
        self.core: AttentionCore = CausalAttention()
        """Where the local tokens sit in the sequence and how they attend (``apply_cp`` replaces it)."""

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        bsz, seq, _ = x.shape
        rope = self.core.rope_rows(rope, seq)
        # -1 heads: under tensor parallelism each rank holds n_heads / tp of them.
        q = apply_rope(self.wq(x).view(bsz, seq, -1, self.head_dim), rope)
        k = apply_rope(self.wk(x).view(bsz, seq, -1, self.head_dim), rope)
        v = self.wv(x).view(bsz, seq, -1, self.head_dim)
        out = self.core(q, k, v, self.n_rep)
        return self.wo(out.reshape(bsz, seq, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then x + ffn(norm(x)); the ffn is a SwiGLU or a MoE."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.moe_enabled = cfg.moe
        if cfg.moe:
            self.moe = MoE(cfg, shared=FeedForward(cfg.dim, cfg.moe_hidden) if cfg.shared_expert else None)
        else:
            self.feed_forward = FeedForward(cfg.dim, cfg.ffn_hidden)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), rope)
        normed = self.ffn_norm(h)
        return h + (self.moe(normed) if self.moe_enabled else self.feed_forward(normed))


def block_attention(block: nn.Module) -> Attention:
    """A transformer block's attention (``block`` may be wrapped for activation checkpointing, which forwards
    the attribute)."""
    attention = block.attention
    if not isinstance(attention, Attention):
        raise TypeError(f"{type(block).__name__}.attention is a {type(attention).__name__}, not an Attention")
    return attention


class Transformer(nn.Module):
    """Decoder-only language model. Each of embeddings/norm/output may be None (pipeline stages)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings: nn.Module | None = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(cfg) for i in range(cfg.n_layers)})
        self.norm: nn.Module | None = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output: nn.Module | None = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.register_buffer("rope", rope_tables(cfg.dim // cfg.n_heads, cfg.max_seq_len, cfg.rope_theta),
                             persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens
        for layer in self.layers.values():
            h = layer(h, self.rope)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h


def canonical_name(fqn: str) -> str:
    """Parameter name without wrapper prefixes (activation checkpointing, compile)."""
    for wrapper in ("_checkpoint_wrapped_module.", "_orig_mod.", "_fsdp_wrapped_module."):
        fqn = fqn.replace(wrapper, "")
    return fqn


def _full_init(name: str, shape: torch.Size, cfg: ModelConfig, seed: int, device: torch.device) -> torch.Tensor:
    gen = torch.Generator(device=device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    if name.endswith("norm.weight"):
        return torch.ones(shape, device=device)
    # Residual projections scaled by depth (GPT-2 style) keep activations bounded in deep models.
    std = 0.02 / math.sqrt(2 * cfg.n_layers) if name.endswith(("wo.weight", "w2.weight", "experts.w2")) else 0.02
    if name == "output.weight":
        std = cfg.dim ** -0.5
    full = torch.empty(shape, device=device)
    return torch.nn.init.trunc_normal_(full, std=std, a=-3 * std, b=3 * std, generator=gen)


@torch.no_grad()
def init_weights(model: nn.Module, cfg: ModelConfig, seed: int, device: torch.device) -> None:
    """Materialise ``model`` (meta or not) on ``device``: same weights on every mesh."""
    from torch.distributed.tensor import DTensor

    if any(p.is_meta for p in model.parameters()) or any(b.is_meta for b in model.buffers()):
        model.to_empty(device=device)
    for fqn, param in model.named_parameters():
        name = canonical_name(fqn)
        full = _full_init(name, param.shape, cfg, seed, device)
        if isinstance(param, DTensor):
            from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

            shape, offset = compute_local_shape_and_global_offset(full.shape, param.device_mesh, param.placements)
            local = param.to_local()
            index = tuple(slice(o, o + s) for o, s in zip(offset, shape))
            local.copy_(full[index].to(local.dtype))
        else:
            param.copy_(full)
    for module in model.modules():
        if isinstance(module, Transformer):
            module.rope = rope_tables(cfg.dim // cfg.n_heads, cfg.max_seq_len, cfg.rope_theta, device=device)


def _ffn_params(cfg: ModelConfig, experts: int) -> int:
    """A block's SwiGLU, or its router, ``experts`` of the routed experts and the shared one."""
    if not cfg.moe:
        return 3 * cfg.dim * cfg.ffn_hidden
    return cfg.dim * cfg.n_experts + 3 * cfg.dim * cfg.moe_hidden * (experts + int(cfg.shared_expert))


def count_params(cfg: ModelConfig, include_embedding: bool = True, *, active: bool = False) -> int:
    """Parameter count from the config alone (no model needed).

    ``active``: what one token uses: of a MoE block's routed experts only ``top_k``.
    """
    head = cfg.dim // cfg.n_heads
    attn = cfg.dim * cfg.n_heads * head * 2 + cfg.dim * cfg.kv_heads * head * 2
    block = attn + _ffn_params(cfg, cfg.top_k if active else cfg.n_experts) + 2 * cfg.dim
    total = cfg.n_layers * block + cfg.dim + cfg.vocab_size * cfg.dim
    return total + (cfg.vocab_size * cfg.dim if include_embedding else 0)


def expert_params(cfg: ModelConfig) -> int:
    """Parameters of the routed experts (what expert parallelism splits); 0 for a dense model."""
    return cfg.n_layers * 3 * cfg.dim * cfg.moe_hidden * cfg.n_experts if cfg.moe else 0
