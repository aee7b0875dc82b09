"""Byte-level text data that needs no download: the Python standard library's own sources.

The corpus is the concatenation of text files (sorted, so every rank and every
run sees the same bytes). It is cut into windows of ``seq_len + 1`` bytes; a
seeded permutation per epoch orders them into one *global* stream of samples.
Step ``s`` uses samples ``[s*B, (s+1)*B)`` of that stream (``B`` = global
batch) and data-parallel rank ``r`` of ``n`` takes the ``r``-th contiguous
slice. Position therefore depends only on the step: resuming (even on a
different mesh) is exact, and the union of the ranks' slices is the batch a
single process would see.
"""

from __future__ import annotations

import os
import sysconfig
from functools import lru_cache
from pathlib import Path

import torch

from greentrain.errors import ConfigError

__all__ = ["ByteCorpus", "StepBatches", "load_corpus"]

_SUFFIXES = (".py", ".txt", ".md", ".rst")
_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__", ".git"}


def _text_files(root: Path):
    """Text files under ``root`` in a fixed order (sorted walk), lazily: we stop once we have enough."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(_SUFFIXES):
                yield Path(folder) / name


@lru_cache(maxsize=4)
def load_corpus(source: str = "stdlib", max_bytes: int = 4_000_000) -> torch.Tensor:
    """uint8 tensor of up to ``max_bytes`` bytes of text from ``source`` (``stdlib`` or a folder)."""
    root = Path(sysconfig.get_paths()["stdlib"]) if source == "stdlib" else Path(source)
    if not root.is_dir():
        raise ConfigError(f"data.source {str(root)!r}: not a directory; use 'stdlib' or a folder of text files")
    chunks: list[bytes] = []
    total = 0
    for path in _text_files(root):
        try:
            blob = path.read_bytes()
        except OSError:
            continue  # unreadable file: skip, the corpus is still deterministic for this install
        chunks.append(blob)
        total += len(blob)
        if total >= max_bytes:
            break
    data = b"".join(chunks)[:max_bytes]
    if len(data) < 1024:
        raise ConfigError(f"data.source {str(root)!r}: only {len(data)} bytes of text found; need >= 1024")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


class ByteCorpus:
    """Global sample stream over the corpus: sample k -> (input, target) of ``seq_len`` tokens."""

    def __init__(self, corpus: torch.Tensor, seq_len: int, seed: int) -> None:
        self.corpus = corpus
        self.seq_len = seq_len
        self.seed = seed
        self.n_windows = (len(corpus) - 1) // seq_len
        if self.n_windows < 1:
            raise ConfigError(f"train.seq_len={seq_len} is longer than the corpus ({len(corpus)} bytes)")
        self._perm_epoch = -1
        self._perm = torch.empty(0, dtype=torch.long)

    def _order(self, epoch: int) -> torch.Tensor:
        if epoch != self._perm_epoch:
            gen = torch.Generator().manual_seed(self.seed * 7919 + epoch)
            self._perm = torch.randperm(self.n_windows, generator=gen)
            self._perm_epoch = epoch
        return self._perm

    def samples(self, start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Samples ``[start, start+count)`` of the global stream as (inputs, labels), int64."""
        rows = []
        for k in range(start, start + count):
            window = int(self._order(k // self.n_windows)[k % self.n_windows])
            offset = window * self.seq_len
            rows.append(self.corpus[offset:offset + self.seq_len + 1])
        block = torch.stack(rows).long()
        # Contiguous halves: strided views of the (B, T+1) block fail pipeline stages' stride
        # check on some torch builds (2.11) and cannot be pinned without a copy anyway.
        return block[:, :-1].contiguous(), block[:, 1:].contiguous()


class StepBatches:
    """This data-parallel rank's slice of each step's global batch (and of each sequence, under context
    parallelism: ``positions`` are the token positions this rank holds)."""

    def __init__(self, corpus: ByteCorpus, global_batch: int, dp_rank: int, dp_size: int,
                 positions: torch.Tensor | None = None) -> None:
        if global_batch % dp_size:
            raise ConfigError(f"train.global_batch={global_batch} must divide by the data-parallel size {dp_size}")
        self.corpus = corpus
        self.global_batch = global_batch
        self.local_batch = global_batch // dp_size
        self.dp_rank = dp_rank
        self.positions = positions

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Local (inputs, labels) for 0-based optimizer step ``step``."""
        start = step * self.global_batch + self.dp_rank * self.local_batch
        inputs, labels = self.corpus.samples(start, self.local_batch)
        if self.positions is not None:
            inputs, labels = inputs[:, self.positions].contiguous(), labels[:, self.positions].contiguous()
        return inputs, labels

    def state_dict(self, step: int) -> dict[str, int]:
        """Everything needed to resume: the position is a function of the step alone."""
        return {"next_step": step, "seed": self.corpus.seed, "seq_len": self.corpus.seq_len}
