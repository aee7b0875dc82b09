"""Carbon scaling for ``greentrain run``: the replica count is the command's ``--nproc`` (or ``--nproc-per-node``).

``CommandScaler`` is the engine's replica actuator for a supervised command:
the policy's new count becomes a pending request; the supervisor then asks
the command to checkpoint and exit (``--checkpoint-signal``) and relaunches
it with the process-count flag changed (``with_nproc``). The command's
launcher (torchrun, ``accelerate launch``, ``greentrain train``) reshards on
its own resume.
"""

from __future__ import annotations

from collections.abc import Sequence

from greentrain.errors import ConfigError
from greentrain.policies.scaling_profile import ScalingProfile

__all__ = ["NPROC_FLAGS", "CommandScaler", "nproc_of", "with_nproc"]

NPROC_FLAGS = ("--nproc-per-node", "--nproc_per_node", "--nproc")
"""The process-count flags recognised in a command (torchrun's, and greentrain train's)."""


def _find(argv: Sequence[str]) -> tuple[int, str, bool] | None:
    """(index of the value's word, its text, whether written --flag=VALUE) of the last process-count flag."""
    found = None
    for i, word in enumerate(argv):
        if word == "--":
            break
        for flag in NPROC_FLAGS:
            if word == flag and i + 1 < len(argv):
                found = (i + 1, argv[i + 1], False)
            elif word.startswith(flag + "="):
                found = (i, word[len(flag) + 1:], True)
    return found


def nproc_of(argv: Sequence[str]) -> int | None:
    """The command's process count (None without a process-count flag); ConfigError for a non-number."""
    found = _find(argv)
    if found is None:
        return None
    text = found[1]
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"COMMAND: process count {text!r} is not a whole number >= 1 "
                          f"(carbon scaling changes {' / '.join(NPROC_FLAGS)})")
    return int(text)


def with_nproc(argv: Sequence[str], replicas: int) -> list[str]:
    """``argv`` with its process-count flag set to ``replicas``."""
    found = _find(argv)
    if found is None:
        raise ConfigError(f"COMMAND: has no {' / '.join(NPROC_FLAGS)} flag to change")
    index, _text, joined = found
    out = list(argv)
    out[index] = f"{out[index].split('=', 1)[0]}={replicas}" if joined else str(replicas)
    return out


class CommandScaler:
    """Replica actuator of ``greentrain run`` (``greentrain.engine.scaler.ReplicaScaler``)."""

    def __init__(self, profile: ScalingProfile, argv: Sequence[str]) -> None:
        count = nproc_of(argv)
        if count is None:
            raise ConfigError(f"--scaling-profile: COMMAND has no {' / '.join(NPROC_FLAGS)} flag; carbon scaling "
                              "relaunches it with that flag changed")
        if count not in profile.replica_counts:
            raise ConfigError(f"--scaling-profile: COMMAND runs {count} processes, not a count in {profile.origin} "
                              f"(valid: {', '.join(map(str, profile.replica_counts))})")
        self._profile = profile
        self.argv = list(argv)
        self._replicas = count
        self.failed: set[int] = set()
        self.pending: int | None = None
        self.reason = ""

    @property
    def profile(self) -> ScalingProfile:
        kept = tuple(p for p in self._profile.points if p.replicas not in self.failed or p.replicas == self._replicas)
        return ScalingProfile(kept, self._profile.origin)

    @property
    def replicas(self) -> int:
        return self._replicas

    def request(self, replicas: int, reason: str) -> bool:
        if replicas == self._replicas or replicas not in self.profile.replica_counts:
            self.pending = None
            return replicas == self._replicas
        self.pending, self.reason = replicas, reason
        return True

    def switch(self, replicas: int) -> list[str]:
        """Record ``replicas`` as running (the pending request is done); the command line to launch."""
        self._replicas, self.pending = replicas, None
        self.argv = with_nproc(self.argv, replicas)
        return list(self.argv)

    def speed_ratio(self, old: int, new: int) -> float:
        """Throughput at ``old`` over throughput at ``new``: converts remaining running time between counts."""
        return self._profile.point(old).throughput / self._profile.point(new).throughput
