"""Operating points without touching the GPU, and the effect a power-limit change is estimated to have.

Advisory mode may not sweep power limits (that is a write), so its points come
from a profile measured earlier (the profile cache, labelled ``cache``) or, for
a GPU model greentrain ships a measured profile of, from that profile scaled to
this GPU's limits (labelled ``estimated``: another workload on the same GPU
model). ``estimated_effect`` turns two points into the change in energy per
unit of work and in running time, the figures advisory mode reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from greentrain.device.base import GPU
from greentrain.errors import GreentrainError
from greentrain.policies.base import OperatingPoint

if TYPE_CHECKING:
    from greentrain.profiler.cache import ProfileCache
    from greentrain.profiler.collective import Collective

__all__ = ["AdvisoryPoints", "advisory_points", "estimated_effect", "REFERENCE_WORKLOAD"]

REFERENCE_WORKLOAD = "imagenet/resnet50"
"""The shipped profile's workload used for an estimate (measured on every shipped GPU model)."""
_BUILTIN_BY_NAME = (("A40", "a40"), ("V100", "v100"), ("RTX 6000", "rtx6000"))


class AdvisoryPoints:
    """Points for advisory mode: ``points`` (empty when none), their ``source`` and a ``note``."""

    def __init__(self, points: tuple[OperatingPoint, ...], source: str, note: str) -> None:
        self.points, self.source, self.note = points, source, note


def advisory_points(gpus: Sequence[GPU], *, fingerprint: str = "", cache: ProfileCache | None = None,
                    collective: Collective | None = None) -> AdvisoryPoints:
    """Cached measured points for this GPU model and workload, else the shipped profile's estimate."""
    from greentrain.profiler.collective import default_collective
    from greentrain.profiler.profiler import power_limit_grid

    if not gpus:
        return AdvisoryPoints((), "none", "no GPU with power-limit control")
    lead = gpus[0]
    collective = collective or default_collective()
    try:
        grid = power_limit_grid(lead, 25.0)  # the profiler's default grid: the same cache key
    except GreentrainError as e:
        return AdvisoryPoints((), "none", f"power-limit constraints unreadable ({e})")
    if cache is not None:
        from greentrain.profiler.cache import ProfileCache

        world = int(collective.all_reduce([1.0], "sum")[0])
        key = ProfileCache.key(lead.name, fingerprint, "power_limit", grid, world)
        cached = collective.broadcast(cache.load(key) if collective.rank == 0 else None)
        if cached:
            return AdvisoryPoints(tuple(cached), "cache", f"measured earlier for {lead.name} (profile cache)")
    builtin = next((key for text, key in _BUILTIN_BY_NAME if text in lead.name), None)
    if builtin is None:
        return AdvisoryPoints((), "none", f"no cached profile for {lead.name} and this workload, and no shipped "
                              "profile of this GPU model; run once with actuation applied where writes are "
                              "allowed to cache one")
    return AdvisoryPoints(_from_builtin(builtin, grid, len(gpus)), "estimated",
                          f"estimated from the shipped measured profile of {builtin} ({REFERENCE_WORKLOAD}), "
                          "not this workload")


def _from_builtin(gpu_model: str, grid: list[float], n_gpus: int) -> tuple[OperatingPoint, ...]:
    from greentrain.device.profiles import interpolate, load_gpu_profile

    measured = load_gpu_profile(gpu_model).points(REFERENCE_WORKLOAD)
    at = [interpolate(measured, limit) for limit in grid]
    fastest_s = min(p.time_per_epoch_s for p in at)
    return tuple(OperatingPoint(power_limit_w=limit, relative_speed=fastest_s / p.time_per_epoch_s,
                                power_w=p.average_power_w * n_gpus) for limit, p in zip(grid, at))


def _nearest(points: Sequence[OperatingPoint], power_limit_w: float) -> OperatingPoint | None:
    limited = [(p, p.power_limit_w) for p in points if p.power_limit_w is not None]
    return min(limited, key=lambda pair: abs(pair[1] - power_limit_w))[0] if limited else None


def estimated_effect(points: Sequence[OperatingPoint], advised_w: float,
                     current_w: float | None) -> dict[str, float | None] | None:
    """Relative change in energy per unit of work and in running time from ``current_w`` to ``advised_w``.

    None without points or a current limit. ``current_w`` None compares against the fastest point.
    """
    advised = _nearest(points, advised_w)
    if advised is None:
        return None
    current = _nearest(points, current_w) if current_w is not None else max(points, key=lambda p: p.relative_speed)
    if current is None or advised.relative_speed <= 0 or current.relative_speed <= 0 or current.power_w <= 0:
        return None
    energy_ratio = (advised.power_w / advised.relative_speed) / (current.power_w / current.relative_speed)
    return {"energy_change": energy_ratio - 1.0, "time_change": current.relative_speed / advised.relative_speed - 1.0,
            "from_power_limit_w": current.power_limit_w, "to_power_limit_w": advised.power_limit_w}
