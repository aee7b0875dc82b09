"""The one-device fast path, metrics read every N steps, and the prefetching data path."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.tensor import DTensor

from greentrain.runtime.data import ByteCorpus, StepBatches, load_corpus
from greentrain.runtime.deferred import MetricsFetcher, fetch_interval
from greentrain.runtime.prefetch import Prefetcher
from greentrain.runtime.trainer import Trainer

from .harness import tiny_config
from .layouts import compare, reference

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def ref():
    return reference()


def test_one_device_uses_no_fsdp_no_dtensor_and_fused_adamw() -> None:
    trainer = Trainer(tiny_config(parallel={"dp_shard": 1}))
    model = trainer.built.parts[0]
    assert not trainer.uses_fsdp
    assert not any(isinstance(p, DTensor) for p in model.parameters())
    assert not any(type(m).__name__.startswith("FSDP") for m in model.modules())
    (opt,) = trainer.built.optimizers
    assert opt.defaults["fused"] is True and not opt.defaults["foreach"], "CPU has fused AdamW in this torch"


@pytest.mark.timeout(240)
def test_one_device_whole_model_compile_matches_reference(ref) -> None:
    cfg = tiny_config(parallel={"dp_shard": 1}, train={"compile": True, "compile_backend": "aot_eager"})
    trainer = Trainer(cfg)
    model = trainer.built.parts[0]
    assert model._compiled_call_impl is not None, "the whole model is compiled"
    assert all(block._compiled_call_impl is None for block in model.layers.values()), "not per block"
    assert "layers.0.attention.wq.weight" in model.state_dict(), "names stay plain (checkpoints load anywhere)"
    compare(ref, [(m.loss, m.grad_norm) for m in trainer.fit()], "one device, whole-model compile")


@pytest.mark.timeout(120)
def test_metrics_read_every_n_steps_equal_a_synchronous_read() -> None:
    sync_cfg = tiny_config(parallel={"dp_shard": 1}, train={"steps": 7}, metrics={"fetch_every": 1})
    sync = Trainer(sync_cfg)
    expected = [sync.train_step() for _ in range(7)]
    deferred = Trainer(sync_cfg.replace("metrics", fetch_every=3))
    seen: list[int] = []
    deferred.on_step = lambda m: seen.append(m.step)
    got = deferred.fit()
    assert [m.step for m in got] == seen == list(range(1, 8)), "every step once, in order"
    assert [(m.loss, m.grad_norm) for m in got] == [(m.loss, m.grad_norm) for m in expected], "bit-identical"
    assert deferred.fetcher.fetches == 3, "steps 1-3, 4-6 and the last one: three host reads for seven steps"
    assert all(m.loss == m.loss and m.step_time_s > 0 for m in got), "no placeholder (NaN) left"


def test_fetcher_shares_the_window_time_on_a_gpu_and_keeps_host_times_on_cpu() -> None:
    from greentrain.runtime.metrics import StepMetrics

    def step(i: int, host_s: float) -> StepMetrics:
        return StepMetrics(step=i, loss=float("nan"), grad_norm=float("nan"), lr=1.0, tokens=100,
                           tokens_per_s=100 / host_s, step_time_s=host_s, precision="fp32", mfu=0.1)

    cpu = MetricsFetcher(2, torch.device("cpu"))
    cpu.push(step(1, 0.5), torch.tensor(2.0), torch.tensor(3.0), started_s=0.0)
    assert not cpu.due()
    cpu.push(step(2, 0.25), torch.tensor(4.0), torch.tensor(5.0), started_s=0.0)
    assert cpu.due()
    out = cpu.fetch()
    assert [(m.loss, m.grad_norm, m.step_time_s) for m in out] == [(2.0, 3.0, 0.5), (4.0, 5.0, 0.25)]
    assert cpu.fetch() == [] and cpu.fetches == 1
    assert fetch_interval(None, torch.device("cpu")) == 1 and fetch_interval(None, torch.device("cuda")) == 10
    assert fetch_interval(4, torch.device("cuda")) == 4


@pytest.fixture(scope="module")
def batches() -> StepBatches:
    return StepBatches(ByteCorpus(load_corpus("stdlib", 60_000), seq_len=16, seed=5), 8, 1, 2)


def test_prefetching_path_yields_exactly_the_old_batches(batches: StepBatches) -> None:
    fresh = StepBatches(ByteCorpus(batches.corpus.corpus, 16, 5), 8, 1, 2)
    prefetcher = Prefetcher(fresh, torch.device("cpu"))
    try:
        # In order, then a resume-like jump back and one forward, across an epoch boundary.
        far = batches.corpus.n_windows // 8 + 1
        order = [0, 1, 2, 3, 1, 2, far, far + 1, 0]
        for step in order:
            x, y = prefetcher.get(step)
            ex, ey = batches.batch(step)
            assert torch.equal(x, ex) and torch.equal(y, ey), f"step {step}"
            assert x.is_contiguous() and y.is_contiguous()
        assert prefetcher.hits == 5, "sequential steps come from the prefetched batch"
    finally:
        prefetcher.close()


def test_samples_are_contiguous_for_pipeline_stages(batches: StepBatches) -> None:
    x, y = batches.batch(3)
    assert x.is_contiguous() and y.is_contiguous()  # torch 2.11 pipeline stages reject (T+1, 1) strides
    assert x.stride() == (16, 1)


class _Recorder:
    """A step hook like the greentrain session's: it keeps the losses it is given and never stops."""

    should_stop = False

    def __init__(self) -> None:
        self.losses: list[object] = []

    def on_step_end(self, step: int, tokens: int, loss: object) -> None:
        self.losses.append(loss)


def test_a_step_hook_gets_the_device_loss_and_adds_no_host_read() -> None:
    cfg = tiny_config(parallel={"dp_shard": 1}, train={"steps": 7}, metrics={"fetch_every": 3})
    plain = Trainer(cfg)
    expected = [m.loss for m in plain.fit()]
    hooked = Trainer(cfg)
    hooked.hook = hook = _Recorder()
    got = hooked.fit()
    assert hooked.fetcher.fetches == 3, "a hook must not turn the deferred reads into one read per step"
    assert all(isinstance(loss, torch.Tensor) for loss in hook.losses) and len(hook.losses) == 7
    assert [float(loss) for loss in hook.losses] == expected == [m.loss for m in got]
