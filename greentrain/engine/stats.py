"""Step-time statistics: what the deadline guard and the policy's snapshot use.

Durations are in the job clock's seconds (with a ``ReplayClock`` that is the
simulated calendar), so work remaining and the deadline share one time base.
The first step after a (re)start is dropped once others exist: it carries
warm-up costs (allocator, caches) that later steps do not. The rate model is
``policies/rate.py`` ``RateEstimator``: a robust recent median to plan with, a
high quantile for the deadline, and the user's estimate until enough steps
and time are measured. Deadline warnings wait for that (``measured``), plans
for a median of a few steps after the warm-up step (``settled``): neither is
moved by one evaluation step.
"""

from __future__ import annotations

import math

from greentrain.policies.rate import RateEstimator, estimate_room_s

__all__ = ["StepTimes"]

MIN_STEPS = 8
"""Steps measured before they replace the user's estimate of the step time."""
PLAN_MIN_STEPS = 3
"""Steps measured after the warm-up step before a wait is planned from their median (``settled``): fewer than the
deadline warning's ``MIN_STEPS``, so a short dirty spell at the start is still paused through."""
MIN_SPAN_S = 60.0
"""Job-clock seconds measured before they replace it (a few fast steps on a busy minute are not a rate)."""


class StepTimes:
    """The job's step times: a robust typical value, its spread, and a pessimistic one for guarantees."""

    def __init__(self, window: int = 64, recent: int = 16, prior_s: float | None = None,
                 min_steps: int = MIN_STEPS, min_span_s: float = MIN_SPAN_S) -> None:
        if window < 2 or recent < 1:
            raise ValueError("window must be >= 2 and recent >= 1")
        self.rate = RateEstimator(recent=recent, history=max(window, recent), min_samples=min_steps,
                                  min_span_s=min_span_s, prior_s=prior_s)
        """The rate model (robust median, pessimistic quantile, stability, re-plan trigger)."""
        self._warmup_s: float | None = None
        self._skip_next = True
        self.probe_s: float | None = None
        """A step time measured outside the loop while the job waits (``Progress.rate_probe``): it replaces
        the prior and floors the pessimistic estimate until the loop measures steps again."""

    @property
    def prior_s(self) -> float | None:
        """Expected step time before enough is measured (a user hint or a restored value)."""
        return self.rate.prior_s

    @prior_s.setter
    def prior_s(self, value: float | None) -> None:
        self.rate.prior_s = value

    def add(self, duration_s: float) -> None:
        """Record one step's duration (negative or non-finite values are ignored)."""
        if not math.isfinite(duration_s) or duration_s < 0:
            return
        if self._skip_next:
            self._skip_next = False
            self._warmup_s = duration_s  # used only while nothing else is known
            return
        self.rate.add(duration_s)
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
        return self.rate.count

    @property
    def measured(self) -> bool:
        """Whether the measured rate is stable: ``min_steps`` steps after the warm-up step and ``min_span_s`` of
        them, so neither the first steps nor one slow step (an evaluation inside step 0) stand for the rate."""
        return self.rate.stable

    @property
    def settled(self) -> bool:
        """Whether a rate can be planned with: ``PLAN_MIN_STEPS`` measured after the warm-up step (their
        median is not moved by one evaluation step), else the user's estimate or a probe. Planned from the
        warm-up step alone, one run would pause at step 5 and an identical one never."""
        return self.rate.count >= PLAN_MIN_STEPS or self.prior_s is not None or self.probe_s is not None

    @property
    def known(self) -> bool:
        """Whether any estimate exists (measured, probed or prior)."""
        return self.mean_s is not None

    @property
    def mean_s(self) -> float | None:
        """The typical step time, seconds: the robust recent median once stable, else the probe or prior
        (else the warm-up step, when nothing else is known)."""
        if self.rate.stable or (self.rate.count and self.prior_s is None and self.probe_s is None):
            return self.rate.robust_s
        if self.probe_s is not None:
            return self.probe_s
        return self.prior_s if self.prior_s is not None else self._warmup_s

    @property
    def std_s(self) -> float:
        """The measured spread, seconds: pessimistic minus typical (0 before the measurement is stable)."""
        mean, pessimistic = self.mean_s, self.pessimistic_s
        return 0.0 if mean is None or pessimistic is None else max(0.0, pessimistic - mean)

    @property
    def pessimistic_s(self) -> float | None:
        """One step, pessimistically: the measured high quantile (never below the typical value or a probe);
        before the measurement is stable, the slower of the estimate and what is measured so far (the guard
        is cautious early; the plan keeps the estimate)."""
        mean = self.mean_s
        if mean is None:
            return None
        measured = self.rate.pessimistic_s if self.rate.stable else self.rate.measured_s
        return max(mean, measured or 0.0, self.probe_s or 0.0)

    def upper_total_s(self, steps: int) -> float | None:
        """Upper bound on the time of ``steps`` more steps, at the pessimistic step time: with an estimate
        error allowed (``rate.prior_spread``), never below its room (``estimate_room_s``)."""
        pessimistic = self.pessimistic_s
        if pessimistic is None:
            return None
        if self.rate.prior_spread > 0 and self.mean_s is not None:
            pessimistic = max(pessimistic, estimate_room_s(self.mean_s, self.prior_s, self.rate.prior_spread))
        return max(0, steps) * pessimistic
