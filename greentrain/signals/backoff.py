"""Exponential backoff with jitter, honouring a server's ``Retry-After``.

After the n-th consecutive failure a provider is not asked again for
``min(max_s, base_s * 2**(n-1))`` seconds, of which a random half is jitter
("equal jitter"), so many ranks or nodes that failed together do not retry
in lockstep. A ``Retry-After`` longer than that wins.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["Backoff"]


@dataclass(slots=True, kw_only=True)
class Backoff:
    """Retry schedule of one provider; times come from the caller's clock."""

    base_s: float = 30.0
    max_s: float = 3600.0
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0
    not_before: datetime | None = None

    def ready(self, now: datetime) -> bool:
        """Whether the provider may be asked at ``now``."""
        return self.not_before is None or now >= self.not_before

    def failed(self, now: datetime, retry_after_s: float | None = None) -> float:
        """Record a failure at ``now``; returns the wait in seconds before the next try."""
        self.failures += 1
        cap_s = min(self.max_s, self.base_s * 2 ** (self.failures - 1))
        wait_s = cap_s / 2 + self.rng.uniform(0, cap_s / 2)
        if retry_after_s is not None:
            wait_s = max(wait_s, min(retry_after_s, 24 * 3600.0))
        self.not_before = now + timedelta(seconds=wait_s)
        return wait_s

    def succeeded(self) -> None:
        """Reset after a success."""
        self.failures, self.not_before = 0, None
