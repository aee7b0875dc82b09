"""The byte-level stdlib corpus: deterministic, sharded across data-parallel ranks, resumable."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from greentrain.errors import ConfigError
from greentrain.runtime.data import ByteCorpus, StepBatches, load_corpus


@pytest.fixture(scope="module")
def corpus() -> ByteCorpus:
    return ByteCorpus(load_corpus("stdlib", 50_000), seq_len=16, seed=3)


def test_text_is_real_python_source(corpus: ByteCorpus) -> None:
    text = bytes(corpus.corpus.tolist()).decode("utf-8", errors="replace")
    assert "def " in text and "import " in text


def test_labels_are_inputs_shifted(corpus: ByteCorpus) -> None:
    x, y = corpus.samples(0, 4)
    assert x.shape == y.shape == (4, 16) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_dp_slices_partition_the_global_batch(corpus: ByteCorpus) -> None:
    whole = StepBatches(corpus, global_batch=8, dp_rank=0, dp_size=1)
    for step in (0, 5):
        gx, _ = whole.batch(step)
        parts = [StepBatches(corpus, 8, r, 4).batch(step)[0] for r in range(4)]
        assert torch.equal(torch.cat(parts), gx)
        assert not torch.equal(parts[0], parts[1])
    assert not torch.equal(whole.batch(0)[0], whole.batch(1)[0])


def test_position_depends_only_on_step_across_epochs(corpus: ByteCorpus) -> None:
    again = ByteCorpus(corpus.corpus, seq_len=16, seed=3)
    far = corpus.n_windows * 2 + 7  # third epoch: a new permutation, still reproducible
    assert torch.equal(corpus.samples(far, 3)[0], again.samples(far, 3)[0])
    other = ByteCorpus(corpus.corpus, seq_len=16, seed=4)
    assert not torch.equal(corpus.samples(0, 3)[0], other.samples(0, 3)[0])


def test_bad_sources(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        load_corpus(str(tmp_path / "nope"), 10_000)
    (tmp_path / "a.txt").write_text("tiny", encoding="utf-8")
    with pytest.raises(ConfigError, match="only 4 bytes"):
        load_corpus(str(tmp_path), 10_000)
    with pytest.raises(ConfigError, match="must divide by the data-parallel size 3"):
        StepBatches(ByteCorpus(load_corpus("stdlib", 50_000), 16, 0), 8, 0, 3)
