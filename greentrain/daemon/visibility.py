"""Which GPUs a connected job may change: the ones its own process was given.

A scheduler hands a job its GPUs through ``CUDA_VISIBLE_DEVICES`` (and, with
device cgroups, by hiding the rest). The daemon reads both for the peer's pid
(``/proc/<pid>/environ`` as it was at exec, ``devices.list`` of its cgroup v1
``devices`` controller where one exists) and intersects them with the
``[gpu_access]`` allow-list of the daemon config, so a job cannot take a free
GPU that belongs to someone else's allocation.
"""

from __future__ import annotations

import pwd
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GPUIdentity", "visible_gpus", "cuda_visible", "cgroup_gpu_minors", "NVIDIA_MAJOR"]

NVIDIA_MAJOR = 195
"""Character-device major of /dev/nvidia<N>; the minor is the GPU's index."""


@dataclass(frozen=True, slots=True)
class GPUIdentity:
    """A GPU the daemon manages, as visibility rules name it."""

    uuid: str
    index: int


def _read_environ(pid: int, proc: Path) -> dict[str, str] | None:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def cuda_visible(value: str | None, gpus: Sequence[GPUIdentity]) -> set[str] | None:
    """UUIDs named by a ``CUDA_VISIBLE_DEVICES`` value (None when unset: no restriction).

    Like CUDA, reading stops at the first entry that names no GPU; '' or '-1' hides all.
    """
    if value is None:
        return None
    chosen: set[str] = set()
    for entry in (e.strip() for e in value.split(",")):
        if entry.isdigit():
            match = [g for g in gpus if g.index == int(entry)]
        elif entry.startswith("GPU-") and len(entry) > 4:
            match = [g for g in gpus if g.uuid.startswith(entry)]
            match = match if len(match) == 1 else []  # an ambiguous prefix names nothing
        else:
            match = []  # MIG instances, '-1', typos: CUDA stops here
        if not match:
            break
        chosen.add(match[0].uuid)
    return chosen


def cgroup_gpu_minors(
    pid: int, proc: Path = Path("/proc"), cgroup_root: Path = Path("/sys/fs/cgroup")
) -> set[int] | None:
    """GPU indices the peer's cgroup v1 device list allows; None when it does not restrict (or is v2)."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "devices" not in controllers.split(","):
            continue
        try:
            rules = (cgroup_root / "devices" / path.lstrip("/") / "devices.list").read_text().split("\n")
        except OSError:
            return None
        minors: set[int] = set()
        for rule in rules:
            parts = rule.split()
            if len(parts) < 2:
                continue
            if parts[0] == "a" or parts[1] in ("*:*", f"{NVIDIA_MAJOR}:*"):
                return None
            major, _, minor = parts[1].partition(":")
            if parts[0] == "c" and major == str(NVIDIA_MAJOR) and minor.isdigit():
                minors.add(int(minor))
        return minors
    return None


def _allowed_by_config(uid: int, allow: Mapping[str, Sequence[str]], gpus: Sequence[GPUIdentity]) -> set[str] | None:
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None
    entries = allow.get(str(uid))
    if entries is None and name is not None:
        entries = allow.get(name)
    if entries is None:
        entries = allow.get("*")
    if entries is None:
        return None if not allow else set()  # an allow-list names everyone it lets in
    return {g.uuid for g in gpus if g.uuid in entries or str(g.index) in entries}


def visible_gpus(
    pid: int,
    uid: int,
    gpus: Sequence[GPUIdentity],
    allow: Mapping[str, Sequence[str]] | None = None,
    *,
    proc: Path = Path("/proc"),
    cgroup_root: Path = Path("/sys/fs/cgroup"),
) -> tuple[set[str], str]:
    """(UUIDs the peer may change, a short reason naming what limited it)."""
    allowed = {g.uuid for g in gpus}
    reasons = []
    env = _read_environ(pid, proc)
    if env is None:
        return set(), f"cannot read /proc/{pid}/environ (process gone?)"
    cuda = cuda_visible(env.get("CUDA_VISIBLE_DEVICES"), gpus)
    if cuda is not None:
        allowed &= cuda
        reasons.append(f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES'][:60]!r}")
    minors = cgroup_gpu_minors(pid, proc, cgroup_root)
    if minors is not None:
        allowed &= {g.uuid for g in gpus if g.index in minors}
        reasons.append(f"device cgroup allows /dev/nvidia{sorted(minors)}")
    by_config = _allowed_by_config(uid, allow or {}, gpus)
    if by_config is not None:
        allowed &= by_config
        reasons.append(f"[gpu_access] allows uid {uid} {sorted(by_config)}")
    return allowed, "; ".join(reasons) or "no restriction"
