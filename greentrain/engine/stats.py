"""Step-time statistics: what the deadline guard and the policy's snapshot use.

Durations are in the job clock's seconds (with a ``ReplayClock`` that is the
simulated calendar), so work remaining and the deadline share one time base.
The first step after a (re)start is dropped once others exist: it carries
warm-up costs (allocator, caches) that later steps do not.
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["StepTimes"]


class StepTimes:
    """Rolling mean/std of step durations plus a pessimistic estimate for guarantees."""

    def __init__(self, window: int = 64, recent: int = 8, prior_s: float | None = None) -> None:
        if window < 2 or recent < 1:
            raise ValueError("window must be >= 2 and recent >= 1")
        self._all: deque[float] = deque(maxlen=window)
        self._recent: deque[float] = deque(maxlen=recent)
        self._warmup_s: float | None = None
        self._skip_next = True
        self.prior_s = prior_s
        """Expected step time before any is measured (a user hint or a restored value)."""
        self.probe_s: float | None = None
        """A step time measured outside the loop while the job waits (``Progress.rate_probe``): it replaces
        the prior and floors the pessimistic estimate until the loop measures steps again."""

    def add(self, duration_s: float) -> None:
        """Record one step's duration (negative or non-finite values are ignored)."""
        if not math.isfinite(duration_s) or duration_s < 0:
            return
        if self._skip_next:
            self._skip_next = False
            self._warmup_s = duration_s  # used only while nothing else is known
            return
        self._all.append(duration_s)
        self._recent.append(duration_s)
        self.probe_s = None  # the loop's own measurement is the better witness again

    def note_probe(self, duration_s: float) -> None:
        """A step time measured while waiting (a busier or quieter machine than the last steps saw)."""
        if math.isfinite(duration_s) and duration_s > 0:
            self.probe_s = duration_s

    def restart(self) -> None:
        """A resume: the next step carries warm-up costs again and is not counted."""
        self._skip_next = True

    @property
    def count(self) -> int:
        """Steps counted in the statistics."""
        return len(self._all)

    def _samples(self) -> list[float]:
        if self._all:
            return list(self._all)
        return [self._warmup_s] if self._warmup_s is not None else []

    @property
    def known(self) -> bool:
        """Whether any estimate exists (measured, probed or prior)."""
        return bool(self._samples()) or self.prior_s is not None or self.probe_s is not None

    @property
    def mean_s(self) -> float | None:
        """Mean step time, seconds (the prior when nothing is measured yet)."""
        samples = self._samples()
        if samples:
            return sum(samples) / len(samples)
        return self.probe_s if self.probe_s is not None else self.prior_s

    @property
    def std_s(self) -> float:
        """Sample standard deviation, seconds (0 with fewer than two samples)."""
        samples = self._samples()
        if len(samples) < 2:
            return 0.0
        mean = sum(samples) / len(samples)
        return math.sqrt(sum((s - mean) ** 2 for s in samples) / (len(samples) - 1))

    @property
    def pessimistic_s(self) -> float | None:
        """One step, pessimistically: max(overall mean, recent mean) + 2 std (slow-downs show up first)."""
        mean = self.mean_s
        if mean is None:
            return None
        return self._worst_mean_s(mean) + 2.0 * self.std_s

    def upper_total_s(self, steps: int, z: float = 2.0) -> float | None:
        """Upper bound on the time of ``steps`` more steps: n·max(mean, recent) + z·std·√n (a sum of n steps)."""
        mean = self.mean_s
        if mean is None:
            return None
        n = max(0, steps)
        return n * self._worst_mean_s(mean) + z * self.std_s * math.sqrt(n)

    def _worst_mean_s(self, mean: float) -> float:
        recent = list(self._recent)
        worst = max(mean, sum(recent) / len(recent)) if recent else mean
        return max(worst, self.probe_s or 0.0)
