"""What greentrain would have done with runs CodeCarbon recorded (``greentrain whatif``).

Each run becomes a ``SimJob``: its duration is the work at full speed, its
mean draw (energy / duration) the running power, and its deadline the
duration x a slack factor (or a fixed number of hours) from its start. Where
the run's GPU matches a profile the package ships, each measured power limit
is a mode: the GPU's share of the draw scales as the profile measured, the
rest (CPU, RAM) stays. The job is replayed with ``sim.simulate``, the code
behind ``greentrain simulate``: the same policy decisions, forecasts made
only from the past, a held job's idle draw charged while it waits, and
run-now as the baseline. The saving is run-now minus the policy's schedule,
both on the same carbon signal.
"""

from __future__ import annotations

import re
import statistics
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from greentrain.codecarbon import CodeCarbonRun, SkippedRow, zone_for
from greentrain.device.profiles import BUILTIN_GPUS, GPUProfile, load_gpu_profile
from greentrain.errors import ConfigError
from greentrain.policies.base import Policy
from greentrain.policies.slot_planner import Mode
from greentrain.policies.timing import RunNowPolicy
from greentrain.signals.base import IntensityPoint
from greentrain.sim.job import SimJob, profile_modes
from greentrain.sim.replay import ForecasterLike, TraceIndex
from greentrain.sim.report import RunResult, simulate
from greentrain.sim.sources import IntensitySource, IntensityWindow, NoIntensity

__all__ = ["WhatIfSettings", "WhatIfRun", "WhatIfFile", "what_if", "match_profile", "PRECISION_NOTE"]

PRECISION_NOTE = "no profile (the shipped profiles measure power limits, not precisions)"
_GPU_NAMES = (("v100", re.compile(r"\bV100\b", re.I)), ("a40", re.compile(r"\bA40\b", re.I)),
              ("rtx6000", re.compile(r"\bRTX\s*6000\b(?!\s*Ada)", re.I)))


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIfSettings:
    """How each recorded run is turned into a job to replay."""

    slack: float = 2.0
    """Deadline = the run's duration x this, from its start (ignored with ``deadline_h``)."""
    deadline_h: float | None = None
    """A fixed deadline, hours after each run's start."""
    resume_overhead_min: float = 5.0
    idle_ratio: float = 0.12
    """Draw while held paused, as a share of the running draw (unless ``idle_power_kw``)."""
    idle_power_kw: float | None = None
    zone: str | None = None
    """Price every run in this zone instead of the zone of its country and region."""
    gpu_profile: str | None = None
    """None: the shipped profile matching each run's GPU; 'none': no profile; else a profile for every run."""
    workload: str | None = None
    """The profile's workload whose curve to use (None: the median over its workloads)."""

    def __post_init__(self) -> None:
        if self.deadline_h is None and not self.slack >= 1.0:
            raise ConfigError(f"--slack: must be >= 1 (the deadline is the run's duration x slack), got {self.slack:g}")
        if self.deadline_h is not None and not self.deadline_h > 0:
            raise ConfigError(f"--deadline-hours: must be > 0, got {self.deadline_h:g}")
        if not 0 <= self.idle_ratio <= 1:
            raise ConfigError(f"idle_ratio: must be in [0, 1], got {self.idle_ratio:g}")


@dataclass(slots=True, kw_only=True)
class WhatIfRun:
    """One recorded run and what the policy would have done with it, in the run's own calendar."""

    run: CodeCarbonRun
    zone: str
    result: RunResult
    offset: timedelta
    """Carbon-signal time - the run's time (a trace of another year)."""
    signal: str
    profile: str
    notes: list[str] = field(default_factory=list)

    def local(self, when: datetime | None) -> datetime | None:
        """A time of the replay in the run's own calendar."""
        return None if when is None else when - self.offset

    @property
    def deadline(self) -> datetime:
        return self.result.deadline - self.offset

    @property
    def saving_g(self) -> float:
        """Run-now minus the policy, net of the held idle draw while waiting."""
        return self.result.run_now.emissions_g - self.result.policy.emissions_g

    @property
    def delay_s(self) -> float | None:
        """How much later than run-now the job finishes (None: it did not finish)."""
        done, now = self.result.policy.finished_at, self.result.run_now.finished_at
        return None if done is None or now is None else (done - now).total_seconds()

    @property
    def power_limits_w(self) -> list[float]:
        """The power limits the schedule ran at, in order of first use (empty without a profile)."""
        seen: list[float] = []
        for interval in self.result.policy.schedule:
            if interval.power_limit_w is not None and interval.power_limit_w not in seen:
                seen.append(interval.power_limit_w)
        return seen


@dataclass(slots=True)
class WhatIfFile:
    """One emissions file: the runs replayed, the rows skipped (reading or pricing) and notes."""

    path: str
    runs: list[WhatIfRun]
    skipped: list[SkippedRow]
    notes: list[str]


def match_profile(gpu_model: str) -> str | None:
    """The shipped profile measured on ``gpu_model`` (CodeCarbon's '1 x NVIDIA A40'), or None."""
    for name, pattern in _GPU_NAMES:
        if pattern.search(gpu_model):
            return name
    return None


def _curve(profile: GPUProfile, workload: str | None) -> tuple[list[tuple[float, float, float]], str]:
    """[(power limit W, speed, power / full power)], full speed first, and where it came from."""
    if workload is not None:
        modes = profile_modes(profile, workload)
        return [(m.power_limit_w or 0.0, m.speed, m.power_w / modes[0].power_w) for m in modes], \
            f"profile {profile.gpu}, {workload}"
    curves = [profile_modes(profile, w) for w in profile.workloads()]
    limits = sorted(set.intersection(*({m.power_limit_w or 0.0 for m in c} for c in curves)), reverse=True)
    by_limit = [{m.power_limit_w or 0.0: (m.speed / c[0].speed, m.power_w / c[0].power_w) for m in c} for c in curves]
    points = [(w, statistics.median(b[w][0] for b in by_limit), statistics.median(b[w][1] for b in by_limit))
              for w in limits]
    return points, f"profile {profile.gpu} (median of {len(curves)} workloads)"


def _modes(run: CodeCarbonRun, settings: WhatIfSettings,
           profiles: dict[str, GPUProfile]) -> tuple[tuple[Mode, ...], str]:
    """The run's modes: one at its mean draw, or one per measured power limit of its GPU's profile."""
    full = Mode(1.0, run.power_w)
    spec = settings.gpu_profile
    if spec is not None and spec.lower() == "none":
        return (full,), "no profile (--gpu-profile none)"
    name = spec or match_profile(run.gpu_model)
    if name is None:
        return (full,), f"no profile for {run.gpu_model!r}" if run.gpu_model else "no profile (no GPU in the row)"
    gpu_w = run.gpu_power_w
    if not gpu_w:
        return (full,), f"no profile (no GPU energy in the row, profile {name} not applied)"
    if name not in profiles:
        profiles[name] = load_gpu_profile(name)
    curve, label = _curve(profiles[name], settings.workload)
    rest_w = max(0.0, run.power_w - gpu_w)
    return tuple(Mode(speed, rest_w + gpu_w * ratio, limit) for limit, speed, ratio in curve), label


def _split_at(points: list[IntensityPoint], when: datetime) -> list[IntensityPoint]:
    """``points`` with the interval containing ``when`` cut in two there, so a replay can start at ``when``."""
    i = bisect_right(points, when, key=lambda p: p.start) - 1
    if i < 0 or points[i].start == when or when >= points[i].end:
        return points
    p = points[i]
    return [*points[:i], replace(p, end=when), replace(p, start=when), *points[i + 1:]]


def _job(run: CodeCarbonRun, settings: WhatIfSettings, modes: tuple[Mode, ...]) -> SimJob:
    deadline_s = settings.deadline_h * 3600 if settings.deadline_h is not None else run.duration_s * settings.slack
    waiting_w = (settings.idle_power_kw * 1000 if settings.idle_power_kw is not None
                 else settings.idle_ratio * modes[0].power_w)
    return SimJob(work_s=run.duration_s, deadline_s=deadline_s, modes=modes,
                  resume_overhead_s=settings.resume_overhead_min * 60, profiled=len(modes) > 1,
                  waiting_power_w=waiting_w)


def _replay(run: CodeCarbonRun, zone: str, source: IntensitySource, policy: Policy, forecaster: ForecasterLike,
            settings: WhatIfSettings, profiles: dict[str, GPUProfile]) -> WhatIfRun:
    modes, profile = _modes(run, settings, profiles)
    job = _job(run, settings, modes)
    notes = []
    if job.deadline_s < job.work_s:
        notes.append(f"deadline {job.deadline_s / 3600:.2f} h is shorter than the run "
                     f"({job.work_s / 3600:.2f} h): runs now")
        policy = RunNowPolicy()
    horizon = timedelta(seconds=max(job.deadline_s, job.work_s))
    window: IntensityWindow = source.window(zone, run.started_at, run.started_at + horizon)
    start = run.started_at + window.offset
    trace = TraceIndex(_split_at(window.points, start), source.name)
    try:
        trace.require_cover(start, start + horizon, "the deadline")
    except ConfigError as e:
        raise NoIntensity(str(e).removeprefix("--trace: ")) from None
    result = simulate(trace, [start], job, policy, forecaster)[0]
    return WhatIfRun(run=run, zone=zone, result=result, offset=window.offset, signal=window.label,
                     profile=profile, notes=notes)


def what_if(runs: list[CodeCarbonRun], source: IntensitySource, policy: Policy, forecaster: ForecasterLike,
            settings: WhatIfSettings) -> tuple[list[WhatIfRun], list[SkippedRow]]:
    """Replay every run; those that cannot be priced come back as skipped rows with the reason."""
    done: list[WhatIfRun] = []
    skipped: list[SkippedRow] = []
    profiles: dict[str, GPUProfile] = {}
    if settings.gpu_profile not in (None, "none") and settings.gpu_profile.lower() not in BUILTIN_GPUS:
        profiles[settings.gpu_profile] = load_gpu_profile(settings.gpu_profile)  # a bad file fails once, at once
    for run in runs:
        zone = settings.zone or zone_for(run.country_iso_code, run.region, run.country_name)
        if zone is None and source.zone is None:
            skipped.append(SkippedRow(run.row, "no known country in the row; give --zone"))
            continue
        try:
            outcome = _replay(run, zone or str(source.zone), source, policy, forecaster, settings, profiles)
            if zone is None:
                outcome.notes.append(f"no known country in the row: priced in the trace's zone {source.zone}")
            done.append(outcome)
        except NoIntensity as e:
            skipped.append(SkippedRow(run.row, str(e)))
    return done, skipped
