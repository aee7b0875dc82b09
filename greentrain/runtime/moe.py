"""Mixture of experts: top-k routing, a load-balancing loss, dropless or capacity-limited dispatch.

A MoE block replaces the dense SwiGLU. A linear router scores every token
against ``n_experts`` experts; each token goes to its ``top_k`` best, and their
outputs are summed with the router's (renormalised) probabilities as weights.
An optional shared expert sees every token. Tokens are sorted by expert so
each expert runs one matrix product over its tokens; the dispatcher moves them
to where the experts live (here, or on other ranks: ``ep.py``).

The load-balancing loss follows Switch Transformer / DeepSeek, per sequence:
``E / k · Σ_e f_e · P_e`` with ``f_e`` the fraction of the sequence's routed
slots taken by expert ``e`` (times ``k``) and ``P_e`` its mean probability; 1
when balanced. Per sequence (not per batch) makes it the same number on any
mesh: data parallelism splits a batch by sequence, and under context
parallelism the per-sequence sums are all-reduced first. Its gradient enters
backward through the block's output (``AuxLossGrad``), so it works under
pipeline parallelism, where only the last stage sees the language-model loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor

from greentrain.runtime.config import ModelConfig

__all__ = ["MoE", "GroupedExperts", "Routing", "route", "balance_loss", "AuxLossGrad", "LocalDispatch",
           "moe_layers", "local_weight"]


def local_weight(param: torch.Tensor) -> torch.Tensor:
    """A parameter as a plain tensor: this rank's shard of a DTensor (experts split over ``ep``)."""
    return param.to_local() if isinstance(param, DTensor) else param


class _ScaleGrad(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by ``scale``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad * ctx.scale, None


class GroupedExperts(nn.Module):
    """``n`` SwiGLU experts stored as 3-D weights (expert, out, in), so ``ep`` can split dimension 0."""

    def __init__(self, n_experts: int, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(n_experts, hidden, dim))
        self.w3 = nn.Parameter(torch.empty(n_experts, hidden, dim))
        self.w2 = nn.Parameter(torch.empty(n_experts, dim, hidden))
        self.grad_scale = 1.0
        """Set by ``apply_ep`` to 1/ep: an expert's gradient sums the tokens of all ep ranks, and the
        data-parallel average the dense parameters get from FSDP must also divide it by ep."""

    def forward(self, tokens: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """``tokens`` sorted by local expert, ``counts[e]`` of them for expert ``e``; output in the same order."""
        w1, w2, w3 = (local_weight(w) for w in (self.w1, self.w2, self.w3))
        if self.grad_scale != 1.0:
            w1, w2, w3 = (_ScaleGrad.apply(w, self.grad_scale) for w in (w1, w2, w3))
        outs = [(F.silu(chunk @ w1[e].t()) * (chunk @ w3[e].t())) @ w2[e].t()
                for e, chunk in enumerate(tokens.split(counts)) if chunk.shape[0]]
        if not outs:
            # No token reached these experts. The (empty) output must still depend on the tokens and on every
            # weight: backward then runs the dispatch's all-to-all here as on the ranks that did get tokens
            # (else they wait for this one forever), and the weights get a zero gradient for FSDP to reduce.
            return tokens * 0 + 0 * (w1.sum() + w2.sum() + w3.sum())
        return torch.cat(outs)


@dataclass(frozen=True, slots=True)
class Routing:
    """Where each token goes: ``expert`` and ``gate`` are (tokens, k); ``probs`` is (tokens, experts)."""

    expert: torch.Tensor
    gate: torch.Tensor
    probs: torch.Tensor


def route(logits: torch.Tensor, top_k: int) -> Routing:
    """Softmax over experts in fp32, the ``top_k`` best per token, their probabilities renormalised."""
    probs = torch.softmax(logits.float(), dim=-1)
    gate, expert = probs.topk(top_k, dim=-1)
    if top_k > 1:
        gate = gate / gate.sum(-1, keepdim=True)
    return Routing(expert=expert, gate=gate, probs=probs)


def balance_loss(routing: Routing, n_sequences: int, n_experts: int, top_k: int,
                 reduce_sequence: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Per-sequence load-balancing loss, averaged over sequences (1.0 when perfectly balanced).

    ``reduce_sequence`` sums per-sequence statistics over the ranks that hold parts of each sequence
    (context parallelism); it must be autograd-aware.
    """
    probs = routing.probs.view(n_sequences, -1, n_experts)
    tokens = probs.shape[1]
    chosen = F.one_hot(routing.expert.view(n_sequences, -1), n_experts).sum(1).float()  # (seq, E) slots
    prob_sum = probs.sum(1)
    count = torch.full((1,), float(tokens), device=probs.device)
    if reduce_sequence is not None:
        stats = reduce_sequence(torch.cat([prob_sum, chosen.detach(), count.expand(n_sequences, 1)], dim=1))
        prob_sum, chosen, count = stats[:, :n_experts], stats[:, n_experts:2 * n_experts], stats[:, -1:]
    f = chosen / (count * top_k)
    p = prob_sum / count
    return (n_experts * (f * p).sum(-1)).mean()


class AuxLossGrad(torch.autograd.Function):
    """Identity on ``out``; backward also sends ``scale`` as the gradient of ``aux`` (Megatron's trick).

    The auxiliary loss so joins backward wherever the block's output does, without the language-model
    loss having to carry it (pipeline stages see only their own output).
    """

    @staticmethod
    def forward(ctx, out: torch.Tensor, aux: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        ctx.aux_meta = (aux.shape, aux.dtype, aux.device)
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        shape, dtype, device = ctx.aux_meta
        return grad, torch.full(shape, ctx.scale, dtype=dtype, device=device), None


class LocalDispatch:
    """All experts live on this rank: run them on the sorted tokens."""

    @torch.compiler.disable  # per-expert sizes are data: eager, even inside a compiled block
    def __call__(self, tokens: torch.Tensor, counts: torch.Tensor, experts: GroupedExperts) -> torch.Tensor:
        return experts(tokens, counts.tolist())


class MoE(nn.Module):
    """Routed experts (+ an optional shared expert) in place of a block's SwiGLU."""

    def __init__(self, cfg: ModelConfig, shared: nn.Module | None = None) -> None:
        super().__init__()
        self.n_experts, self.top_k = cfg.n_experts, cfg.top_k
        self.capacity_factor = cfg.capacity_factor
        self.router = nn.Linear(cfg.dim, cfg.n_experts, bias=False)
        self.experts = GroupedExperts(cfg.n_experts, cfg.dim, cfg.moe_hidden)
        self.shared_expert = shared
        self.dispatch: Callable[[torch.Tensor, torch.Tensor, GroupedExperts], torch.Tensor] = LocalDispatch()
        """Moves sorted tokens to their experts and back; ``apply_ep`` puts the all-to-all one here."""
        self.reduce_sequence: Callable[[torch.Tensor], torch.Tensor] | None = None
        """Set by ``apply_cp``: sums per-sequence statistics over the context-parallel ranks."""
        self.aux_grad_scale = cfg.aux_loss_coef
        """The auxiliary loss's weight in backward: ``aux_loss_coef`` / gradient-accumulation steps."""
        self.recording = False
        """While True (a real forward, not a recomputation), each call adds to the router statistics."""
        self.tokens_per_expert = torch.zeros(cfg.n_experts)
        self.aux_sum = torch.zeros(())
        self.calls = 0

    def reset_stats(self, device: torch.device) -> None:
        """Start a new step's router statistics."""
        self.tokens_per_expert = torch.zeros(self.n_experts, device=device)
        self.aux_sum = torch.zeros((), device=device)
        self.calls = 0

    def _keep_within_capacity(self, expert_sorted: torch.Tensor, counts: torch.Tensor,
                              capacity_factor: float) -> torch.Tensor:
        """Mask of the sorted slots an expert keeps: its first ``capacity`` tokens (in token order)."""
        capacity = math.ceil(capacity_factor * expert_sorted.numel() / self.n_experts)
        starts = torch.cumsum(counts, 0) - counts
        rank_in_expert = torch.arange(expert_sorted.numel(), device=counts.device) - starts[expert_sorted]
        return rank_in_expert < capacity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bsz, seq, dim = x.shape
        tokens = x.reshape(-1, dim)
        routing = route(self.router(tokens), self.top_k)
        aux = balance_loss(routing, bsz, self.n_experts, self.top_k, self.reduce_sequence)
        flat_expert = routing.expert.reshape(-1)
        order = torch.argsort(flat_expert, stable=True)  # stable: the same order on any mesh
        expert_sorted = flat_expert[order]
        counts = torch.bincount(flat_expert, minlength=self.n_experts)
        if self.recording:  # what the router chose (before any capacity drop)
            self.tokens_per_expert = self.tokens_per_expert.to(counts.device) + counts
            self.aux_sum = self.aux_sum.to(aux.device) + aux.detach()
            self.calls += 1
        token_of = order // self.top_k
        gate = routing.gate.reshape(-1)[order]
        if self.capacity_factor is not None:
            keep = self._keep_within_capacity(expert_sorted, counts, self.capacity_factor)
            token_of, gate, expert_sorted = token_of[keep], gate[keep], expert_sorted[keep]
            counts = torch.bincount(expert_sorted, minlength=self.n_experts)
        routed = self.dispatch(tokens[token_of], counts, self.experts)
        weighted = routed.to(tokens.dtype) * gate.unsqueeze(1).to(tokens.dtype)
        out = torch.zeros_like(tokens).index_add_(0, token_of, weighted)
        out = out.view(bsz, seq, dim)
        if self.shared_expert is not None:
            out = out + self.shared_expert(x)
        return AuxLossGrad.apply(out, aux, self.aux_grad_scale) if torch.is_grad_enabled() else out


def block_moe(block: nn.Module) -> MoE:
    """The MoE layer of a transformer block with ``moe_enabled`` (``block`` may be wrapped for activation
    checkpointing, which forwards the attribute)."""
    moe = block.moe
    if not isinstance(moe, MoE):
        raise TypeError(f"{type(block).__name__}.moe is a {type(moe).__name__}, not a MoE layer")
    return moe


def moe_layers(module: nn.Module) -> list[MoE]:
    """Every MoE block of ``module`` (a model or a pipeline stage), in order."""
    return [m for m in module.modules() if isinstance(m, MoE)]
