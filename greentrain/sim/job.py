"""The simulated job: how much work, by when, and how it runs at each setting.

Work is measured in seconds at full speed. Without a GPU profile the job has
one mode (full speed at ``power_kw``). With a measured Zeus profile each
power limit p is a mode: speed ``t_epoch(max) / t_epoch(p)``, draw
``average_power(p) × gpus``; full speed is the profile's maximum limit.
An elastic job has a scaling profile instead: its one mode runs at
``replicas`` N (the count without greentrain), work is counted at N, and
r replicas run at speed ``throughput(r) / throughput(N)`` drawing
``power_w(r)``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from greentrain.device.profiles import GPUProfile
from greentrain.errors import ConfigError
from greentrain.policies.base import OperatingPoint
from greentrain.policies.slot_planner import Mode
from greentrain.policies.scaling_profile import ScalingProfile

__all__ = ["SimJob", "profile_modes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimJob:
    """One job to replay: work, deadline, modes (full speed first) and resume overhead."""

    work_s: float
    """Running time needed at full speed, seconds."""
    deadline_s: float
    """Time from the job's start by which it must finish, seconds."""
    modes: tuple[Mode, ...]
    """Ways to run; ``modes[0]`` is full speed (speed 1.0)."""
    resume_overhead_s: float = 300.0
    """Time at full power without progress each time the job resumes after a pause."""
    migration_overhead_s: float = 900.0
    """Time at full power without progress when a paused job resumes in another zone (checkpoint transfer and
    restart: replaces the resume overhead there); only several ``--trace ZONE=FILE`` use it."""
    profiled: bool = False
    """Give the policy the modes as measured operating points (power dimension)."""
    waiting_power_w: float = 0.0
    """Draw while paused between the first start and the finish (held hardware idle; 0 = released)."""
    scaling: ScalingProfile | None = None
    """An elastic job's scaling profile (carbon scaling); None = a fixed-size job."""
    replicas: int | None = None
    """With ``scaling``: the count the job runs at without greentrain (``modes[0]``); work is counted there."""
    min_replicas: int = 1
    """With ``scaling``: the fewest replicas a policy may run it at (a pause is always allowed)."""
    max_replicas: int | None = None
    """With ``scaling``: the most replicas a policy may run it at (None = the profile's largest count)."""

    def __post_init__(self) -> None:
        if not self.work_s > 0:
            raise ConfigError(f"--work-hours: must be > 0, got {self.work_s / 3600:g}")
        if not self.deadline_s > 0:
            raise ConfigError(f"--deadline-hours: must be > 0, got {self.deadline_s / 3600:g}")
        if not 0 <= self.resume_overhead_s < 3600:
            raise ConfigError(
                f"--resume-overhead-min: must be in [0, 60) minutes, got {self.resume_overhead_s / 60:g}"
            )
        if not 0 <= self.migration_overhead_s < 3600:
            raise ConfigError(f"--migration-overhead-min: must be in [0, 60) minutes, got "
                              f"{self.migration_overhead_s / 60:g}")
        if not (isinstance(self.waiting_power_w, int | float) and 0 <= self.waiting_power_w < float("inf")):
            raise ConfigError(f"--idle-power-kw: must be a number >= 0, got {self.waiting_power_w / 1000:g}")
        if not self.modes or any(m.speed <= 0 or m.power_w <= 0 for m in self.modes):
            raise ConfigError("modes: need at least one mode with speed > 0 and power > 0")
        self._check_scaling()

    def _check_scaling(self) -> None:
        if self.scaling is None:
            return
        counts = self.scaling.replica_counts
        if self.replicas not in counts:
            raise ConfigError(f"--replicas: {self.replicas} is not a count in {self.scaling.origin} "
                              f"(valid: {', '.join(map(str, counts))})")
        high = max(counts) if self.max_replicas is None else self.max_replicas
        if not 1 <= self.min_replicas <= high:
            raise ConfigError(f"--min-replicas/--max-replicas: need 1 <= min <= max, got {self.min_replicas} "
                              f"and {high}")
        if not any(self.min_replicas <= r <= high for r in counts):
            raise ConfigError(f"--min-replicas/--max-replicas: no count of {self.scaling.origin} lies in "
                              f"[{self.min_replicas}, {high}] (it has {', '.join(map(str, counts))})")

    def replica_mode(self, replicas: int) -> Mode:
        """The mode of running at ``replicas`` (speed relative to ``self.replicas``)."""
        if self.scaling is None or self.replicas is None:
            raise ConfigError("replica_mode: this job has no scaling profile")
        return Mode(self.scaling.speed(replicas, self.replicas), self.scaling.power_w(replicas), replicas=replicas)

    def replica_modes(self) -> tuple[Mode, ...]:
        """Every allowed count as a mode, fewest replicas first (empty for a fixed-size job)."""
        if self.scaling is None:
            return ()
        high = max(self.scaling.replica_counts) if self.max_replicas is None else self.max_replicas
        return tuple(self.replica_mode(r) for r in self.scaling.replica_counts if self.min_replicas <= r <= high)

    def overhead_s(self, zone: str | None, held_in: str | None) -> float:
        """The time without progress of resuming in ``zone`` when the checkpoint is ``held_in`` (None: same)."""
        moves = zone is not None and held_in is not None and zone != held_in
        return self.migration_overhead_s if moves else self.resume_overhead_s

    @property
    def full(self) -> Mode:
        return self.modes[0]

    @property
    def operating_points(self) -> tuple[OperatingPoint, ...]:
        """What a profiler would have measured; empty for a timing-only job."""
        if not self.profiled:
            return ()
        return tuple(
            OperatingPoint(power_limit_w=m.power_limit_w, relative_speed=m.speed, power_w=m.power_w)
            for m in self.modes
        )

    def mode_for(self, power_limit_w: float | None, current: Mode) -> Mode:
        """The mode a Decision's power limit selects: None keeps ``current``; else the nearest limit."""
        if power_limit_w is None or not self.profiled:
            return current
        return min(self.modes, key=lambda m: abs((m.power_limit_w or 0.0) - power_limit_w))

    @classmethod
    def constant_power(cls, *, work_h: float, deadline_h: float, power_kw: float = 1.0,
                       resume_overhead_min: float = 5.0, idle_power_kw: float = 0.0) -> SimJob:
        """A timing-only job drawing ``power_kw`` while it runs."""
        if not power_kw > 0:
            raise ConfigError(f"--power-kw: must be > 0, got {power_kw}")
        return cls(work_s=work_h * 3600, deadline_s=deadline_h * 3600, modes=(Mode(1.0, power_kw * 1000.0),),
                   resume_overhead_s=resume_overhead_min * 60, waiting_power_w=idle_power_kw * 1000.0)

    @classmethod
    def from_scaling_profile(cls, profile: ScalingProfile, replicas: int, *, work_h: float, deadline_h: float,
                             resume_overhead_min: float = 5.0, idle_power_kw: float = 0.0, min_replicas: int = 1,
                             max_replicas: int | None = None) -> SimJob:
        """An elastic job: ``work_h`` hours of running at ``replicas``; any allowed count per interval."""
        if replicas not in profile.replica_counts:
            raise ConfigError(f"--replicas: {replicas} is not a count in {profile.origin} "
                              f"(valid: {', '.join(map(str, profile.replica_counts))})")
        full = Mode(1.0, profile.power_w(replicas), replicas=replicas)
        return cls(work_s=work_h * 3600, deadline_s=deadline_h * 3600, modes=(full,),
                   resume_overhead_s=resume_overhead_min * 60, waiting_power_w=idle_power_kw * 1000.0,
                   scaling=profile, replicas=replicas, min_replicas=min_replicas, max_replicas=max_replicas)

    @classmethod
    def from_profile(cls, profile: GPUProfile, workload: str, *, work_h: float, deadline_h: float,
                     batch_size: int | None = None, gpus: int = 1, resume_overhead_min: float = 5.0,
                     idle_power_kw: float = 0.0) -> SimJob:
        """A job with one mode per measured power limit of ``workload``."""
        if gpus < 1:
            raise ConfigError(f"--gpus: must be >= 1, got {gpus}")
        modes = profile_modes(profile, workload, batch_size, gpus)
        return cls(work_s=work_h * 3600, deadline_s=deadline_h * 3600, modes=modes,
                   resume_overhead_s=resume_overhead_min * 60, profiled=True,
                   waiting_power_w=idle_power_kw * 1000.0)


def profile_modes(profile: GPUProfile, workload: str, batch_size: int | None = None, gpus: int = 1) -> tuple[Mode, ...]:
    """Modes from a measured profile, highest power limit (full speed) first.

    Where a limit was measured more than once (several optimizers), time and
    power are averaged.
    """
    if workload not in profile.workloads():
        raise ConfigError(f"--workload: {workload!r} not in {profile.source}; valid: {', '.join(profile.workloads())}")
    by_limit: dict[float, list[tuple[float, float]]] = defaultdict(list)
    for point in profile.points(workload, batch_size):
        by_limit[point.power_limit_w].append((point.time_per_epoch_s, point.average_power_w))
    limits = sorted(by_limit, reverse=True)
    mean = {w: (sum(t for t, _ in v) / len(v), sum(p for _, p in v) / len(v)) for w, v in by_limit.items()}
    t_full = mean[limits[0]][0]
    return tuple(Mode(t_full / mean[w][0], mean[w][1] * gpus, w) for w in limits)
