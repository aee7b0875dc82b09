"""Carbon scaling in the runtime: the data-parallel size changes between launches, the training does not.

A change of replica count happens at a step boundary: every rank saves a DCP
checkpoint and stops, rank 0 writes the request (``greentrain-replicas.json``
beside the checkpoints), and the launcher (``runtime/relaunch.py``) starts the
job again at the new world size, where DCP reshards the checkpoint on load.

What makes the loss curve the same as a fixed-size run's:

- the global batch never changes; each rank keeps its micro-batch (what fits
  its memory) and gradient accumulation absorbs the change:
  ``grad_accum = global_batch / (replicas × micro_batch)``;
- the data order is a function of the step alone (``runtime/data.py``), so
  the new world continues exactly where the old one stopped;
- the data-parallel size is pure FSDP over all data-parallel ranks
  (``dp_shard = -1``), so any count reshards; TP and PP sizes stay fixed.

The replica count is ``world_size / (tp × pp)``. ``RuntimeScaler`` is the
engine's replica actuator (``greentrain.engine.scaling``) for this runtime: it
offers the counts the global batch divides into and that never failed to
launch, keeps the profile's point for the running count up to date with what
training measures, and turns a request into a stop after the next checkpoint.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.policies.scaling_profile import ScalingProfile, format_scaling_profile, load_scaling_profile
from greentrain.provenance import Source
from greentrain.runtime.config import JobConfig
from greentrain.userfile import JSONValue, load_json

__all__ = ["REQUEST_FILE", "ESTIMATE_FILE", "ReplicaState", "RuntimeScaler", "config_at", "elastic_sets",
           "load_profile_for", "micro_batch", "replicas_of", "sized_config"]

REQUEST_FILE = "greentrain-replicas.json"
"""In the checkpoint folder: the count to launch at, the last count that trained, counts that failed."""
ESTIMATE_FILE = "greentrain-scaling.csv"
"""In the checkpoint folder: the profile with the running counts' points updated from training."""
_BLEND = 0.3  # weight of a new measurement in the running estimate (a few checkpoints to converge)


def replicas_of(cfg: JobConfig, world_size: int) -> int:
    """Data-parallel replicas at ``world_size`` (the mesh's other sizes stay fixed)."""
    if cfg.parallel.cp > 1 or cfg.parallel.ep > 1:  # both split the data ranks; resizing them is not built
        raise ConfigError(f"greentrain.scaling_profile: carbon scaling resizes the data-parallel dimension with tp and "
                          f"pp fixed; it needs parallel.cp = parallel.ep = 1 (got cp={cfg.parallel.cp}, "
                          f"ep={cfg.parallel.ep})")
    fixed = cfg.parallel.tp * cfg.parallel.pp
    if world_size % fixed:
        raise ConfigError(f"world size {world_size} does not divide by parallel.tp × parallel.pp = {fixed}")
    return world_size // fixed


def micro_batch(cfg: JobConfig, world_size: int) -> int:
    """Sequences per rank per micro-step in ``cfg`` at ``world_size``: what each rank keeps at any size."""
    replicas = replicas_of(cfg, world_size)
    per_step = replicas * cfg.train.grad_accum
    if cfg.train.global_batch % per_step:
        raise ConfigError(f"train.global_batch={cfg.train.global_batch} must divide by {replicas} replicas × "
                          f"train.grad_accum={cfg.train.grad_accum}")
    return cfg.train.global_batch // per_step


def elastic_sets(cfg: JobConfig, replicas: int, micro: int) -> dict[str, dict[str, int | str]]:
    """The config overrides at ``replicas``: pure FSDP over the data-parallel ranks, accumulation absorbing
    the change; ConfigError when the global batch does not split into ``replicas × micro``."""
    if cfg.train.global_batch % (replicas * micro):
        raise ConfigError(f"train.global_batch={cfg.train.global_batch} does not split into {replicas} replicas × "
                          f"micro-batch {micro}")
    return {"train": {"grad_accum": cfg.train.global_batch // (replicas * micro)},
            "parallel": {"dp_shard": -1, "dp_replicate": 1, "mesh": "manual"}}


def config_at(cfg: JobConfig, replicas: int, micro: int) -> JobConfig:
    """``cfg`` for a world of ``replicas`` data-parallel ranks (× tp × pp), same global batch and data order."""
    data = cfg.to_dict()
    for section, values in elastic_sets(cfg, replicas, micro).items():
        data[section].update(values)
    from greentrain.runtime.config import config_from_dict

    return config_from_dict(data, origin="elastic")


def _int(value: JSONValue) -> int:
    """``int(value)``, TypeError for null, a list or an object (as ``int()`` itself raises)."""
    if value is None or isinstance(value, (list, dict)):
        raise TypeError(f"expected a number, got {value!r}")
    return int(value)


@dataclass(slots=True)
class ReplicaState:
    """What the launcher and the ranks share across launches (one small JSON file, written atomically)."""

    replicas: int
    """The count to launch at next."""
    working: int | None = None
    """The last count that trained (the fallback when a launch at a new count fails)."""
    step: int = 0
    """The checkpoint step of the last change."""
    failed: list[int] = field(default_factory=list)
    """Counts whose launch failed; never planned again in this job."""
    reason: str = ""
    changes: int = 0
    """Changes of count so far (each a checkpoint, relaunch and reshard)."""
    micro_batch: int | None = None
    """Sequences per rank per micro-step, fixed at the first launch: every later size derives its
    accumulation from it, whoever relaunches the job (this launcher, Slurm, Kubernetes)."""

    @classmethod
    def load(cls, folder: str | Path) -> ReplicaState | None:
        path = Path(folder) / REQUEST_FILE
        if not path.is_file():
            return None
        data = load_json(path, what="replica state")
        try:
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            micro, working, failed = data.get("micro_batch"), data.get("working"), data.get("failed", [])
            if not (working is None or isinstance(working, int)) or not isinstance(failed, list):
                raise TypeError("working or failed")
            return cls(replicas=_int(data["replicas"]), working=working, step=_int(data.get("step", 0)),
                       failed=[_int(r) for r in failed], reason=str(data.get("reason", "")),
                       changes=_int(data.get("changes", 0)), micro_batch=_int(micro) if micro else None)
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{path}: replica state is damaged; delete it to restart at --nproc") from None

    def save(self, folder: str | Path) -> None:
        path = Path(folder) / REQUEST_FILE
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.replace(tmp, path)


class RuntimeScaler:
    """The engine's replica actuator in a runtime rank (``greentrain.engine.scaling.ReplicaScaler``)."""

    def __init__(self, cfg: JobConfig, profile: ScalingProfile, world_size: int, *, micro: int,
                 failed: tuple[int, ...] = ()) -> None:
        self.cfg = cfg
        self.micro = micro
        self.failed = tuple(failed)
        self._replicas = replicas_of(cfg, world_size)
        self._profile = profile
        self.pending: int | None = None
        """The count a decision asked for; the runtime stops after the next checkpoint and relaunches."""
        self.reason = ""

    @property
    def replicas(self) -> int:
        return self._replicas

    @property
    def profile(self) -> ScalingProfile:
        """The counts this job can run at: in the profile, a divisor of the global batch by the micro-batch,
        never failed; the running count always (the planner prices staying)."""
        batch = self.cfg.train.global_batch
        kept = tuple(p for p in self._profile.points if p.replicas == self._replicas or (
            p.replicas not in self.failed and batch % (p.replicas * self.micro) == 0))
        return ScalingProfile(kept, self._profile.origin)

    def request(self, replicas: int, reason: str) -> bool:
        if replicas == self._replicas:
            self.pending = None
            return True
        if replicas not in self.profile.replica_counts:
            return False
        self.pending, self.reason = replicas, reason
        return True

    def observe(self, throughput: float, power_w: float | None, source: Source) -> None:
        """Blend a measurement at the running count into the estimate (power kept when not measured)."""
        if not (math.isfinite(throughput) and throughput > 0):
            return
        points = list(self._profile.points)
        for i, point in enumerate(points):
            if point.replicas == self._replicas:
                new_w = power_w if power_w and math.isfinite(power_w) and power_w > 0 else point.power_w
                points[i] = replace(point, throughput=(1 - _BLEND) * point.throughput + _BLEND * throughput,
                                    power_w=(1 - _BLEND) * point.power_w + _BLEND * new_w,
                                    source=source if power_w else point.source)
        self._profile = ScalingProfile(tuple(points), self._profile.origin)

    def write_estimate(self, folder: str | Path) -> Path:
        """The running estimate as a profile CSV in ``folder`` (atomically); the user's file is never changed."""
        path = Path(folder) / ESTIMATE_FILE
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(format_scaling_profile(self._profile.points), encoding="utf-8")
        os.replace(tmp, path)
        return path


def sized_config(cfg: JobConfig, world_size: int) -> tuple[JobConfig, int]:
    """An elastic job's config at ``world_size`` and its micro-batch: the one recorded by the first launch
    (``ReplicaState``), else this config's own at this size (the first launch)."""
    state = ReplicaState.load(cfg.checkpoint.dir) if cfg.checkpoint.dir else None
    micro = state.micro_batch if state is not None and state.micro_batch else micro_batch(cfg, world_size)
    return config_at(cfg, replicas_of(cfg, world_size), micro), micro


def load_profile_for(cfg: JobConfig) -> ScalingProfile:
    """The profile to plan with: the running estimate of an earlier launch of this job, else the user's file."""
    estimate = Path(cfg.checkpoint.dir or ".") / ESTIMATE_FILE
    if cfg.checkpoint.dir and estimate.is_file():
        return load_scaling_profile(estimate)
    if not cfg.greentrain.scaling_profile:
        raise ConfigError("greentrain.scaling_profile: not set")
    return load_scaling_profile(cfg.greentrain.scaling_profile)

