"""The ``[elastic]`` section of a training configuration: carbon scaling of the data-parallel size.

Kept beside ``sections.py`` (which registers it) so the elastic runtime's settings live with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.runtime.checks import MAX_COUNT, Checks

__all__ = ["ElasticConfig"]


@dataclass(kw_only=True, slots=True)
class ElasticConfig:
    """Carbon scaling: run more data-parallel replicas while the grid is clean, fewer while it is dirty."""

    scaling_profile: str | None = None
    """CSV ``replicas,throughput,power_w`` of this job (``greentrain train --profile-scaling`` writes one);
    with a policy and ``--nproc``, the policy picks the replica count per interval. Unset: a fixed size."""
    profile_steps: int = 4
    """``--profile-scaling``: optimizer steps timed at each world size (after one warm-up step)."""
    min_replicas: int = 1
    """Fewest data-parallel replicas the job may run at (a pause, 0, is always allowed)."""
    max_replicas: int | None = None
    """Most data-parallel replicas (default: the profile's largest count)."""

    def __post_init__(self) -> None:
        c = Checks("elastic", self)
        c.need(self.scaling_profile is None or bool(self.scaling_profile.strip()), "scaling_profile",
               "must be a CSV path (or unset)")
        c.int_range("profile_steps", 1, 10_000)
        c.int_range("min_replicas", 1, MAX_COUNT)
        c.int_range("max_replicas", 1, MAX_COUNT, none_ok=True)
        if self.max_replicas is not None:
            c.need(self.max_replicas >= self.min_replicas, "max_replicas",
                   f"{self.max_replicas} is below elastic.min_replicas={self.min_replicas}")
        c.done()
