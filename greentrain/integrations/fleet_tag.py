"""How a Slurm job joins the fleet, and how many GPUs jobs and partitions have.

A job opts in with a tag in its comment::

    sbatch --hold --requeue --comment="greentrain-fleet(deadline=2026-11-27T06:00:00Z;estimate_h=4)" job.sbatch

``deadline`` is when it must be done (UTC) and ``estimate_h`` its running
time in hours. ``places=clean,dirty`` (optional) names the partitions it may
run on; without it, every partition the controller manages; the partition it
is submitted to alone pins it there. Submitting it held (``--hold``) keeps it from starting before
the controller's first plan; the controller turns the hold into a planned
start. ``--requeue`` lets the controller pause it through the batch
template's checkpoint-and-requeue path; a job Slurm cannot requeue is only
ever started later, never paused.

GPUs are read the way Slurm reports them: ``TresPerJob=gres:gpu:N``,
``TresPerNode=gres:gpu:N`` (times the nodes), ``TresPerTask`` (times the
tasks), or ``gres/gpu=N`` in the job's TRES. A node's GPUs come from its
``Gres=gpu[:type]:N`` list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from greentrain.errors import ConfigError

__all__ = ["FleetTag", "job_gpus", "node_gpus", "partition_gpus"]

_TAG_RE = re.compile(r"greentrain-fleet\(([^)]*)\)")
_GRES_GPU_RE = re.compile(r"(?:^|,)(?:gres[:/])?gpu(?::[\w.-]+)?[:=](\d+)")


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetTag:
    """What a fleet job tells the controller in its comment."""

    deadline: datetime
    estimate_h: float
    places: tuple[str, ...] = ()
    """Partitions it may run on; empty: every managed partition."""

    def render(self) -> str:
        deadline = self.deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        places = f";places={','.join(self.places)}" if self.places else ""
        return f"greentrain-fleet(deadline={deadline};estimate_h={self.estimate_h:g}{places})"

    @classmethod
    def find(cls, comment: str | None, job_id: str) -> FleetTag | None:
        """The tag in ``comment``; None when the job did not opt in; ConfigError when it is damaged."""
        match = _TAG_RE.search(comment or "")
        if match is None:
            return None
        fields = dict(item.split("=", 1) for item in match.group(1).split(";") if "=" in item)
        try:
            deadline = datetime.fromisoformat(fields["deadline"].strip().replace("Z", "+00:00"))
            estimate_h = float(fields["estimate_h"])
        except (KeyError, ValueError):
            raise ConfigError(f"job {job_id}: fleet tag {match.group(0)!r} needs deadline=ISO-8601 UTC and "
                              "estimate_h=HOURS") from None
        if deadline.tzinfo is None:
            deadline = deadline.replace(tzinfo=UTC)
        if not 0 < estimate_h < float("inf"):
            raise ConfigError(f"job {job_id}: fleet tag estimate_h must be > 0, got {fields['estimate_h']}")
        places = tuple(dict.fromkeys(p.strip() for p in fields.get("places", "").split(",") if p.strip()))
        if "places" in fields and not places:
            raise ConfigError(f"job {job_id}: fleet tag places= names no partition (e.g. places=clean,dirty)")
        return cls(deadline=deadline.astimezone(UTC), estimate_h=estimate_h, places=places)


def _gres_gpus(text: str) -> int | None:
    found = [int(n) for n in _GRES_GPU_RE.findall(text or "")]
    return sum(found) if found else None


def job_gpus(record: dict[str, str]) -> int:
    """GPUs a job asks for (0 when it asks for none)."""
    per_job = _gres_gpus(record.get("TresPerJob", ""))
    if per_job is not None:
        return per_job
    for key, count_key in (("TresPerNode", "NumNodes"), ("TresPerTask", "NumTasks")):
        each = _gres_gpus(record.get(key, ""))
        if each is not None:
            count = record.get(count_key, "1").split("-")[0]
            return each * (int(count) if count.isdigit() else 1)
    for key in ("AllocTRES", "ReqTRES", "TRES"):
        total = _gres_gpus(record.get(key, ""))
        if total is not None:
            return total
    return 0


def node_gpus(record: dict[str, str]) -> int:
    """GPUs of a node from its ``Gres=`` list, e.g. ``gpu:4`` or ``gpu:a100:8(S:0-1)``."""
    gres = re.sub(r"\([^)]*\)", "", record.get("Gres", "").strip())
    total = 0
    for item in gres.split(","):
        parts = item.strip().split(":")
        if parts and parts[0] == "gpu" and parts[-1].isdigit() and len(parts) >= 2:
            total += int(parts[-1])
    return total


def partition_gpus(nodes: list[dict[str, str]]) -> dict[str, int]:
    """GPUs per partition: the sum over the partition's nodes that are up (not down, drained or failing)."""
    out: dict[str, int] = {}
    for raw in nodes:
        node = {k: v.strip() for k, v in raw.items()}  # scontrol pads some fields with spaces
        state = node.get("State", "").upper()
        usable = not any(bad in state for bad in ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "INVAL"))
        for partition in filter(None, node.get("Partitions", "").split(",")):
            out[partition] = out.get(partition, 0) + (node_gpus(node) if usable else 0)
    return out
