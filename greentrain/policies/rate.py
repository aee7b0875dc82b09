"""How fast the job works, from measured steps: a robust recent rate and a pessimistic quantile.

A job's step time moves: power limits and precision change it, other tenants
share the node, data loaders stall. The mean of the last few steps follows
every burst, so a job sized from a busy minute keeps a wrong plan. This
estimator gives:

- ``robust_s``: the median of the recent window (a burst of slow steps shorter
  than half the window does not move it);
- ``pessimistic_s``: a high quantile over a longer window, never below the
  robust value: the step time the job plans its deadline with. The reserve
  (``reserve_frac``) is the measured spread between the two, not a constant;
- ``stable``: enough steps *and* enough time measured; before that the user's
  estimate (``prior_s``) stands;
- ``moved``: the robust value left the one the last plan used by more than
  ``replan_frac`` (the caller re-plans and calls ``planned``);
- ``spread_room_s``: the step time a deadline promise is kept with when the
  rate moves in spells (another tenant for hours): the slowest step time seen
  in the history window plus ``SPELL_SPREADS`` times the spread seen (slowest
  less fastest), never below the pessimistic value. A steady job has seen no
  spread, so it keeps no room; a noisy one keeps the room its own spread asks
  for, including a spell slower than any it has seen yet. The simulator plans
  and guards deadlines with it, fed by a running job's intervals and a waiting
  job's rate probes (docs/benchmarks.md, "The wait gate by expected saving").

Durations are in the job clock's seconds (a simulated calendar under replay).
Shared by the engine (``engine/stats.py``) and the simulator (``sim/noise.py``),
so both see the same rate model.
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["SPELL_SPREADS", "RateEstimator", "estimate_room_s"]

SPELL_SPREADS = 2.0
"""How far below the slowest spell seen a deadline's room reaches, in spreads seen (slowest less fastest step
time). After n spells of a uniformly spread step time, the chance that the slowest possible one lies more than
twice the spread beyond the slowest seen is 1/3**(n-1). On the rate-noise benchmark (±50 %, 4 h spells, three
seeds, 690 runs) it kept every deadline, where the slowest seen alone missed 7 of 460 (two seeds) and one
spread beyond it 1 of 120 (docs/benchmarks.md, issue 41)."""


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def estimate_room_s(typical_s: float, estimate_s: float | None, spread: float) -> float:
    """The step time an estimate error of ``spread`` asks for: the slower of the estimate and ``typical_s``,
    times ``1 + spread``, for all the work left.

    The room does not fade as the job measures itself: a rate measured over a few hours says little about
    the next ones (a neighbour arrives, a loader stalls), and a room that faded with the work done let a
    late slow spell miss deadlines the same room met when kept (docs/benchmarks.md, "Live as proven")."""
    anchor = typical_s if estimate_s is None else max(estimate_s, typical_s)
    return anchor * (1.0 + spread)


class RateEstimator:
    """Robust and pessimistic seconds per unit of work (a step), from weighted duration samples.

    Args:
        recent: samples in the robust (median) window.
        history: samples in the pessimistic (quantile) window.
        quantile: the pessimistic quantile of the history window.
        min_samples: samples needed before the measurement replaces the prior.
        min_span_s: measured seconds needed before the measurement replaces the prior.
        replan_frac: relative move of the robust value that calls for a new plan.
        prior_s: the user's estimate, used until the measurement is stable.
        prior_spread: until then, the pessimistic value is ``prior_s × (1 + prior_spread)``: how wrong an
            estimate may be when nothing has been measured.
    """

    def __init__(self, *, recent: int = 32, history: int = 512, quantile: float = 0.9, min_samples: int = 8,
                 min_span_s: float = 0.0, replan_frac: float = 0.1, prior_s: float | None = None,
                 prior_spread: float = 0.0) -> None:
        if recent < 1 or history < recent or not 0.5 <= quantile < 1:
            raise ValueError("need recent >= 1, history >= recent and 0.5 <= quantile < 1")
        self._recent: deque[float] = deque(maxlen=recent)
        self._history: deque[float] = deque(maxlen=history)
        self.quantile = quantile
        self.min_samples = min_samples
        self.min_span_s = min_span_s
        self.replan_frac = replan_frac
        self.prior_s = prior_s
        self.prior_spread = prior_spread
        self.count = 0
        """Samples measured (all time)."""
        self.span_s = 0.0
        """Seconds measured (all time)."""
        self._planned_s: float | None = None

    def add(self, duration_s: float) -> None:
        """One measured step (negative or non-finite values are ignored)."""
        if not math.isfinite(duration_s) or duration_s < 0:
            return
        self._recent.append(duration_s)
        self._history.append(duration_s)
        self.count += 1
        self.span_s += duration_s

    @property
    def stable(self) -> bool:
        """Enough steps and time measured for the measurement to replace the prior."""
        return self.count >= self.min_samples and self.span_s >= self.min_span_s

    @property
    def robust_s(self) -> float | None:
        """Seconds per step to plan with: the recent median once stable, else the prior (else what is measured)."""
        if self._recent and (self.stable or self.prior_s is None):
            return _quantile(list(self._recent), 0.5)
        return self.prior_s

    @property
    def measured_s(self) -> float | None:
        """The recent median of what is measured, stable or not (None before any sample)."""
        return _quantile(list(self._recent), 0.5) if self._recent else None

    @property
    def pessimistic_s(self) -> float | None:
        """Seconds per step the deadline is planned with: the history's high quantile, never below robust."""
        robust = self.robust_s
        if robust is None:
            return None
        if not self._history or not (self.stable or self.prior_s is None):
            return robust * (1.0 + self.prior_spread)
        return max(robust, _quantile(list(self._history), self.quantile))

    def pessimistic_with_room_s(self) -> float | None:
        """The pessimistic value for the rest of the job: the measured one, never below the room the user
        allowed (``prior_spread``, ``estimate_room_s``) over the slower of the estimate and the robust rate."""
        pessimistic, robust = self.pessimistic_s, self.robust_s
        if pessimistic is None or robust is None or self.prior_spread <= 0:
            return pessimistic
        return max(pessimistic, estimate_room_s(robust, self.prior_s, self.prior_spread))

    def spread_room_s(self) -> float | None:
        """Seconds per step to keep a deadline with: ``pessimistic_with_room_s``, never below the slowest step
        in the history window plus ``SPELL_SPREADS`` times the window's spread (a spell slower than any seen
        yet may come for all the work left). A steady job's spread is nil: no room."""
        pessimistic = self.pessimistic_with_room_s()
        if pessimistic is None or not self._history:
            return pessimistic
        slowest, fastest = max(self._history), min(self._history)
        return max(pessimistic, slowest + SPELL_SPREADS * (slowest - fastest))

    @property
    def reserve_frac(self) -> float:
        """The measured spread as a fraction of the robust rate: pessimistic / robust - 1 (0 before stable)."""
        robust, pessimistic = self.robust_s, self.pessimistic_s
        if not robust or pessimistic is None:
            return 0.0
        return max(0.0, pessimistic / robust - 1.0)

    @property
    def moved(self) -> bool:
        """The robust value moved by more than ``replan_frac`` since the last ``planned``."""
        robust = self.robust_s
        if robust is None or self._planned_s is None:
            return False
        return abs(robust - self._planned_s) > self.replan_frac * self._planned_s

    def planned(self) -> None:
        """A plan was made with the current robust value."""
        self._planned_s = self.robust_s
