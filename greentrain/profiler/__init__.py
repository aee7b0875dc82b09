"""Operating-point profiler: measure time and energy per step at each power limit / clock range during warm-up.

``OperatingPointProfiler`` produces the ``OperatingPoint`` tuple policies read
from ``Snapshot.operating_points``; ``ProfileCache`` lets recurring jobs skip
the sweep; ``Collective`` makes every rank agree.
"""

from greentrain.profiler.cache import (
    ProfileCache,
    default_cache_dir,
    workload_fingerprint,
)
from greentrain.profiler.collective import (
    Collective,
    LocalCollective,
    TorchCollective,
    default_collective,
)
from greentrain.profiler.profiler import (
    OperatingPointProfiler,
    ProfilerConfig,
    energy_optimal,
    power_limit_grid,
    sm_clock_grid,
)

__all__ = [
    "OperatingPointProfiler",
    "ProfilerConfig",
    "energy_optimal",
    "power_limit_grid",
    "sm_clock_grid",
    "ProfileCache",
    "default_cache_dir",
    "workload_fingerprint",
    "Collective",
    "LocalCollective",
    "TorchCollective",
    "default_collective",
]
