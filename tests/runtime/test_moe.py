"""Mixture of experts and the context-parallel layout, in one process: routing, the balance loss by hand,
dropless versus capacity, statistics counted once, the 1B preset's size, the data split of cp."""

from __future__ import annotations

import math

import pytest
import torch

from greentrain.runtime.config import load_config
from greentrain.runtime.cp import load_balanced_positions
from greentrain.runtime.ep import _expert_major
from greentrain.runtime.model import Transformer, count_params, expert_params, init_weights
from greentrain.runtime.moe import MoE, balance_loss, moe_layers, route

from .harness import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _softmax(row: list[float]) -> list[float]:
    peak = max(row)
    exps = [math.exp(v - peak) for v in row]
    return [e / sum(exps) for e in exps]


def test_balance_loss_matches_a_hand_computation() -> None:
    # Two sequences of three tokens, four experts, top-2.
    logits = [[2.0, 1.0, 0.0, -1.0], [0.5, 0.4, 3.0, 0.0], [1.0, 1.5, -2.0, 0.3],
              [0.0, 0.0, 0.1, 2.0], [-1.0, 2.0, 0.0, 1.9], [0.3, -0.2, 0.8, 0.1]]
    experts, k = 4, 2
    expected = []
    for seq in (logits[:3], logits[3:]):
        probs = [_softmax(row) for row in seq]
        chosen = [sorted(range(experts), key=lambda e: -p[e])[:k] for p in probs]
        f = [sum(e in c for c in chosen) / (len(seq) * k) for e in range(experts)]  # share of routed slots
        p_mean = [sum(p[e] for p in probs) / len(seq) for e in range(experts)]
        expected.append(experts * sum(fe * pe for fe, pe in zip(f, p_mean)))
    hand = sum(expected) / 2

    routing = route(torch.tensor(logits), k)
    got = balance_loss(routing, n_sequences=2, n_experts=experts, top_k=k)
    assert got.item() == pytest.approx(hand, rel=1e-6)
    # The gates are the chosen probabilities renormalised.
    first = _softmax(logits[0])
    assert routing.gate[0].tolist() == pytest.approx([first[0] / (first[0] + first[1]),
                                                      first[1] / (first[0] + first[1])], rel=1e-6)
    # Perfect balance is 1.0: uniform probabilities and every expert chosen equally often.
    uniform = route(torch.zeros(4, 4), 1)
    even = type(uniform)(expert=torch.arange(4).view(4, 1), gate=uniform.gate, probs=uniform.probs)
    assert balance_loss(even, 1, 4, 1).item() == pytest.approx(1.0)


def _moe(**model) -> tuple[MoE, torch.Tensor]:
    cfg = tiny_config(model={"n_experts": 4, "top_k": 2, "shared_expert": True, **model}).model
    torch.manual_seed(0)
    moe = MoE(cfg)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return moe, torch.randn(2, 6, cfg.dim)


def test_aux_loss_gradient_joins_backward_with_its_weight() -> None:
    moe, x = _moe()
    moe.aux_grad_scale = 0.5
    out = moe(x)
    (out * out).sum().backward()
    injected = moe.router.weight.grad.clone()

    moe.zero_grad()
    moe.aux_grad_scale = 0.0
    out = moe(x)
    tokens = x.reshape(-1, x.shape[-1])
    aux = balance_loss(route(moe.router(tokens), moe.top_k), 2, moe.n_experts, moe.top_k)
    ((out * out).sum() + 0.5 * aux).backward()
    assert torch.allclose(moe.router.weight.grad, injected, atol=1e-6)


def test_dropless_keeps_every_token_and_capacity_drops_the_overflow() -> None:
    moe, x = _moe()
    x = x.abs()
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0] += 5.0  # every token (all inputs > 0) prefers expert 0
    moe.recording = True
    moe.reset_stats(torch.device("cpu"))
    dropless = moe(x)
    assert moe.tokens_per_expert.sum().item() == 12 * 2 and moe.tokens_per_expert[0].item() == 12

    capped, _ = _moe(capacity_factor=1.0)
    capped.load_state_dict(moe.state_dict())
    seen: list[list[int]] = []
    capped.experts.register_forward_pre_hook(lambda _m, args: seen.append(list(args[1])))
    out = capped(x)
    capacity = math.ceil(1.0 * 24 / 4)
    assert max(seen[0]) <= capacity and sum(seen[0]) < 24, "over-capacity slots are dropped"
    assert out.shape == dropless.shape and not torch.allclose(out, dropless)


def test_router_statistics_count_each_forward_once_under_activation_checkpointing() -> None:
    from greentrain.runtime.trainer import Trainer

    cfg = tiny_config(model={"n_experts": 4, "top_k": 2}, parallel={"dp_shard": 1}, train={"ac": "full", "steps": 1})
    [m] = Trainer(cfg).fit()
    slots = cfg.train.global_batch * cfg.train.seq_len * 2 * cfg.model.n_layers
    assert sum(m.expert_tokens) == slots, "recomputation in backward must not count the tokens again"
    assert m.expert_imbalance >= 1.0 and m.aux_loss >= cfg.model.n_layers * 0.99


def test_the_1b_moe_preset_is_near_one_billion_parameters_on_the_meta_device() -> None:
    cfg = load_config("1b-moe").model
    with torch.device("meta"):
        model = Transformer(cfg)
    total = sum(p.numel() for p in model.parameters())
    assert total == count_params(cfg) and 0.9e9 <= total <= 1.1e9
    assert count_params(cfg, active=True) < 0.3 * total  # top-2 of 16 experts
    assert expert_params(cfg) == sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    assert len(moe_layers(model)) == cfg.n_layers


def test_weights_are_the_same_on_any_mesh_for_moe_too() -> None:
    cfg = tiny_config(model={"n_experts": 4, "top_k": 2}).model
    a, b = Transformer(cfg), Transformer(cfg)
    init_weights(a, cfg, seed=3, device=torch.device("cpu"))
    init_weights(b, cfg, seed=3, device=torch.device("cpu"))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    experts = a.layers["0"].moe.experts
    assert experts.w2.std() < experts.w1.std(), "the residual projection is scaled down by depth"


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_load_balanced_chunks_cover_the_sequence_once_with_equal_causal_work(cp: int) -> None:
    seq = 16
    held = [load_balanced_positions(seq, cp, r) for r in range(cp)]
    assert sorted(torch.cat(held).tolist()) == list(range(seq))
    work = [int((p + 1).sum()) for p in held]  # keys each query attends to under the causal mask
    assert len(set(work)) == 1
    assert load_balanced_positions(8, 2, 0).tolist() == [0, 1, 6, 7]


def test_expert_major_reorders_received_tokens() -> None:
    # From 2 source ranks, for 2 local experts: counts[source][expert].
    counts = torch.tensor([[2, 1], [0, 3]])
    # received rows: s0e0 s0e0 s0e1 | s1e1 s1e1 s1e1  -> expert-major: e0: s0 s0 ; e1: s0, s1 s1 s1
    assert _expert_major(counts).tolist() == [0, 1, 2, 3, 4, 5]
    counts = torch.tensor([[1, 2], [2, 1]])
    # rows: s0e0 | s0e1 s0e1 | s1e0 s1e0 | s1e1 -> e0: 0, 3, 4 ; e1: 1, 2, 5
    assert _expert_major(counts).tolist() == [0, 3, 4, 1, 2, 5]


def _starved_expert_rank(rank: int, world: int) -> tuple[bool, bool, float]:
    """Expert parallel over 2 ranks with every token routed to experts 0 and 1 (rank 0's): rank 1 receives
    no token, yet its backward must run the same all-to-alls as rank 0's (or both wait forever)."""
    from torch.distributed.device_mesh import init_device_mesh

    from greentrain.runtime.ep import apply_ep

    moe, x = _moe()
    x = x.abs()
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0] += 5.0
        moe.router.weight[1] += 4.0
    reference, _ = _moe()
    reference.load_state_dict(moe.state_dict())
    x_ref = x.clone().requires_grad_()
    expected = reference(x_ref)
    (expected * expected).sum().backward()

    apply_ep(moe, init_device_mesh("cpu", (world,), mesh_dim_names=("ep",)))
    x = x.requires_grad_()
    out = moe(x)
    (out * out).sum().backward()
    rows = slice(rank * 2, rank * 2 + 2)
    same_grads = (torch.allclose(moe.experts.w1.grad.to_local(), reference.experts.w1.grad[rows], atol=1e-6)
                  and torch.allclose(x.grad, x_ref.grad, atol=1e-6))  # the expert path's input gradient came back
    return torch.allclose(out, expected, atol=1e-6), same_grads, float(moe.experts.w1.grad.to_local().abs().sum())


@pytest.mark.timeout(120)
def test_a_rank_whose_experts_get_no_token_still_joins_backward() -> None:
    from .harness import run_ranks

    (out0, grad0, _), (out1, grad1, idle_grad) = run_ranks(_starved_expert_rank, 2, timeout_s=100)
    assert out0 and out1 and grad0 and grad1
    assert idle_grad == 0.0, "the unused experts get a zero gradient, not none"
