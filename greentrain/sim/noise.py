"""Work-rate noise for the simulator: the job's speed changes while it runs, and the policies face it.

``greentrain simulate --rate-noise SPEC``. A rate of 1.0 is the speed the job
was sized at (``--work-hours`` of running); 0.5 means the same work takes twice
as long (another tenant on the node, a slow data loader), 1.5 means it runs
faster. The rate is a function of the time since the job's start (whether it
runs or waits), so the oracle can be scored on the same realised rate.

SPEC is one of:

- ``none``: the rate is always 1.0.
- ``steps:AMPLITUDE:HOLD[:SEED]``: random step changes. Every so often the
  rate jumps to a value drawn uniformly from [1 - AMPLITUDE, 1 + AMPLITUDE]
  and holds it for a time drawn uniformly from [HOLD/2, 3·HOLD/2]. HOLD is
  hours (``4``, ``4h``) or minutes (``90m``). AMPLITUDE is in [0, 0.9].
  SEED (an integer, default 0) makes the draws repeatable; each start of a
  ``--starts`` sweep gets its own stream from SEED and its start time.
- ``runlog:PATH``: replays the measured step times of a greentrain run log
  (JSONL, ``step`` events): the log's hours since its first step, each at
  the median step time over that hour's mean step time; repeated when the
  job outlasts the log.

A bad SPEC, an unreadable run log, or one without step events is a
``ConfigError`` naming ``--rate-noise``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import statistics
from bisect import bisect_right
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from greentrain.errors import ConfigError

__all__ = ["NO_NOISE", "RateNoise", "RateProfile", "parse_rate_noise"]

_FLAG = "--rate-noise"
_MAX_AMPLITUDE = 0.9


@dataclass(frozen=True, slots=True)
class RateProfile:
    """The realised rate of one run: piecewise constant from ``offsets_s`` (seconds since the start)."""

    offsets_s: tuple[float, ...]
    rates: tuple[float, ...]
    period_s: float | None = None
    """Repeat after this many seconds (a replayed log); None: the last rate holds."""

    def rate_at(self, offset_s: float) -> float:
        """The rate at ``offset_s`` seconds after the start."""
        if self.period_s:
            offset_s = offset_s % self.period_s
        i = bisect_right(self.offsets_s, max(0.0, offset_s)) - 1
        return self.rates[max(0, i)]

    def mean_rate(self, start_s: float, end_s: float, step_s: float = 60.0) -> float:
        """The time-mean rate over [start_s, end_s) (sampled every ``step_s``)."""
        if end_s <= start_s:
            return self.rate_at(start_s)
        count = max(1, math.ceil((end_s - start_s) / step_s))
        width = (end_s - start_s) / count
        return sum(self.rate_at(start_s + (i + 0.5) * width) for i in range(count)) / count


@dataclass(frozen=True, slots=True)
class RateNoise:
    """A parsed SPEC: makes the realised rate profile of each run."""

    kind: str
    """'none', 'steps' or 'runlog'."""
    amplitude: float = 0.0
    hold_s: float = 0.0
    seed: int = 0
    replay: RateProfile | None = None
    spec: str = "none"

    def profile(self, start: datetime, horizon_s: float) -> RateProfile:
        """The rate profile of a run that starts at ``start`` and lasts at most ``horizon_s`` seconds."""
        if self.kind == "runlog" and self.replay is not None:
            return self.replay
        if self.kind != "steps" or self.amplitude == 0:
            return RateProfile((0.0,), (1.0,))
        digest = hashlib.sha256(f"{self.seed}|{start.isoformat()}".encode()).digest()
        draw = random.Random(int.from_bytes(digest[:8], "big"))
        offsets, rates, at_s = [], [], 0.0
        while at_s < horizon_s:
            offsets.append(at_s)
            rates.append(draw.uniform(1.0 - self.amplitude, 1.0 + self.amplitude))
            at_s += draw.uniform(0.5 * self.hold_s, 1.5 * self.hold_s)
        return RateProfile(tuple(offsets), tuple(rates))


NO_NOISE = RateNoise("none")


def _hours(text: str) -> float:
    """'4', '4h' or '90m' -> seconds."""
    value, scale = text.strip().lower(), 3600.0
    if value.endswith("m"):
        value, scale = value[:-1], 60.0
    elif value.endswith("h"):
        value = value[:-1]
    try:
        hold = float(value)
    except ValueError:
        raise ConfigError(f"{_FLAG}: HOLD {text!r} is not a duration (e.g. 4h or 90m)") from None
    if not (math.isfinite(hold) and hold > 0):
        raise ConfigError(f"{_FLAG}: HOLD must be > 0, got {text!r}")
    return hold * scale


def _steps(spec: str, parts: list[str]) -> RateNoise:
    if len(parts) not in (3, 4):
        raise ConfigError(f"{_FLAG}: {spec!r} is not steps:AMPLITUDE:HOLD[:SEED] (e.g. steps:0.5:4h)")
    try:
        amplitude = float(parts[1])
    except ValueError:
        raise ConfigError(f"{_FLAG}: AMPLITUDE {parts[1]!r} is not a number (e.g. 0.5 for ±50 %)") from None
    if not (math.isfinite(amplitude) and 0 <= amplitude <= _MAX_AMPLITUDE):
        raise ConfigError(f"{_FLAG}: AMPLITUDE must be in [0, {_MAX_AMPLITUDE}], got {parts[1]!r}")
    seed = 0
    if len(parts) == 4:
        try:
            seed = int(parts[3])
        except ValueError:
            raise ConfigError(f"{_FLAG}: SEED {parts[3]!r} is not an integer") from None
    return RateNoise("steps", amplitude=amplitude, hold_s=_hours(parts[2]), seed=seed, spec=spec)


def _runlog(spec: str, path_text: str) -> RateNoise:
    path = Path(path_text)
    if not path_text:
        raise ConfigError(f"{_FLAG}: {spec!r} names no run log (runlog:PATH)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{_FLAG}: cannot read run log {path} ({getattr(e, 'strerror', None) or e})") from None
    steps: list[tuple[datetime, float]] = []
    for line in lines:
        try:
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == "step":
                duration = float(event["duration_s"])
                when = datetime.fromisoformat(str(event["t"]).replace("Z", "+00:00"))
                if math.isfinite(duration) and duration > 0:
                    steps.append((when, duration))
        except (ValueError, KeyError, TypeError):
            continue  # a cut or foreign line: the log's other steps still count
    if not steps:
        raise ConfigError(f"{_FLAG}: run log {path} has no step events with a duration; nothing to replay")
    return RateNoise("runlog", replay=_profile_of(steps), spec=spec)


def _profile_of(steps: list[tuple[datetime, float]]) -> RateProfile:
    """Hour buckets since the first step: median step time / the bucket's mean step time."""
    first = steps[0][0]
    typical = statistics.median(d for _, d in steps)
    buckets: dict[int, list[float]] = {}
    for when, duration in steps:
        buckets.setdefault(int((when - first).total_seconds() // 3600), []).append(duration)
    hours = sorted(buckets)
    offsets = tuple(h * 3600.0 for h in hours)
    rates = tuple(min(10.0, typical / statistics.fmean(buckets[h])) for h in hours)
    return RateProfile(offsets, rates, period_s=(hours[-1] + 1) * 3600.0)


def parse_rate_noise(spec: str | None) -> RateNoise:
    """SPEC -> RateNoise (see the module docstring); ConfigError naming ``--rate-noise`` otherwise."""
    if spec is None or spec.strip().lower() in ("", "none"):
        return NO_NOISE
    text = spec.strip()
    kind, _, rest = text.partition(":")
    if kind == "steps":
        return _steps(text, text.split(":"))
    if kind == "runlog":
        return _runlog(text, rest)
    raise ConfigError(f"{_FLAG}: {spec!r} is not none, steps:AMPLITUDE:HOLD[:SEED] or runlog:PATH")
