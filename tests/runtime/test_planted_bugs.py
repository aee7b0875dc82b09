"""The comparison harness fails when the runtime is wrong (planted bugs)."""

from __future__ import annotations

import pytest

from .harness import run_ranks
from .layouts import LAYOUTS, compare, reference, run_layouts

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _doubled_gradients(rank: int, world: int) -> dict:
    """FSDP on 2 ranks with every gradient doubled after backward (a sum-instead-of-mean reduction bug)."""
    from greentrain.runtime import trainer

    original = trainer.Trainer.forward_backward

    def buggy(self, inputs, labels):
        loss = original(self, inputs, labels)
        for p in self.built.params:
            if p.grad is not None:
                p.grad.mul_(2.0)
        return loss

    trainer.Trainer.forward_backward = buggy
    return run_layouts(rank, world, ["fsdp"])


def _async_embedding_redistribute(rank: int, world: int) -> dict:
    """The known trap: stock (async) RowwiseParallel embedding feeding compiled blocks under FSDP2 + TP."""
    from torch.distributed.tensor.parallel import RowwiseParallel

    from greentrain.runtime import tp

    tp.SyncRowwiseParallel = RowwiseParallel
    return run_layouts(rank, world, ["fsdp-x-tp-compiled"])


@pytest.fixture(scope="module")
def ref():
    return reference()


@pytest.mark.timeout(120)
def test_doubled_gradient_is_caught_by_grad_norm_not_loss(ref) -> None:
    got = run_ranks(_doubled_gradients, 2, timeout_s=100)[0]["fsdp"]
    # The first loss is computed before any update: loss alone cannot see the bug...
    assert abs(got[0][0] - ref[0][0]) <= 2e-6
    # ...the pre-clip gradient norm does, and the harness says so.
    assert got[0][1] == pytest.approx(2 * ref[0][1], rel=1e-5)
    with pytest.raises(AssertionError, match="grad_norm"):
        compare(ref, got, "planted")


@pytest.mark.timeout(240)
def test_async_redistribute_into_compiled_block_is_caught(ref) -> None:
    assert "fsdp-x-tp-compiled" in LAYOUTS[4]
    got = run_ranks(_async_embedding_redistribute, 4, timeout_s=220)[0]["fsdp-x-tp-compiled"]
    with pytest.raises(AssertionError, match="step 1: grad_norm"):
        compare(ref, got, "stock RowwiseParallel")
