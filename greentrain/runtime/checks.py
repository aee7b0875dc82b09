"""Range checks for the training configuration, collected so one file's errors come out together.

Each config section's ``__post_init__`` runs a :class:`Checks`; every failed
check is kept as ``(section.key, reason)`` and raised together as
:class:`InvalidConfig`, which the loader turns into one line per problem naming
the file (or the flag the value came from).
"""

from __future__ import annotations

import math
from typing import Any

from greentrain.errors import InvalidConfig

__all__ = ["Checks", "InvalidConfig", "MAX_COUNT", "MAX_DIM", "MAX_EXPERTS", "MAX_PARAMS", "MAX_SEQ_LEN", "MAX_STEPS",
           "MAX_VOCAB"]

# Caps that keep a size within what can be allocated at all, so a typo
# (vocab_size = 1e11) is refused here, not by the allocator minutes later.
MAX_DIM = 1 << 16
MAX_VOCAB = 1 << 24
MAX_SEQ_LEN = 1 << 22
MAX_PARAMS = 10**12
MAX_COUNT = 1 << 20
"""Cap for layer, head, batch and mesh counts."""
MAX_STEPS = 10**12
MAX_EXPERTS = 1 << 12
"""Cap for routed experts per block (and top-k)."""


class Checks:
    """Collects every failed check of one section, so a file's errors come out together."""

    def __init__(self, section: str, owner: object) -> None:
        self.section = section
        self.owner = owner
        self.problems: list[tuple[str, str]] = []

    def need(self, cond: bool, key: str, why: str) -> None:
        if not cond:
            self.problems.append((f"{self.section}.{key}", why))

    def int_range(self, key: str, low: int, high: int, *, none_ok: bool = False) -> bool:
        value = getattr(self.owner, key)
        if value is None and none_ok:
            return True
        ok = low <= value <= high
        if value < low:
            self.need(False, key, f"must be >= {low}, got {value}")
        elif value > high:
            self.need(False, key, f"must be <= {high:,} (larger is beyond what can be allocated or run), "
                                  f"got {value:,}")
        return ok

    def finite(self, key: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, none_ok: bool = False) -> None:
        """A finite float within [low, high] (or (low, high] when ``low_open``)."""
        value = getattr(self.owner, key)
        if value is None and none_ok:
            return
        if not math.isfinite(value):
            self.need(False, key, f"must be a finite number, got {value}")
        elif low is not None and (value <= low if low_open else value < low):
            self.need(False, key, f"must be {'>' if low_open else '>='} {low:g}, got {value:g}")
        elif high is not None and value > high:
            self.need(False, key, f"must be <= {high:g}, got {value:g}")

    def done(self) -> None:
        if self.problems:
            raise InvalidConfig(self.problems)
