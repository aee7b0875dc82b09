"""The cleanest window: where a run of a given length, started at a step of a piecewise-constant carbon
intensity (or at the first edge), emits least. Shared by the ``best-window`` policy (seconds from now) and
the fleet's per-job baseline (hours on the trace's clock)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["cleanest_start"]


def cleanest_start(edges: Sequence[float], values: Sequence[float], length: float) -> float:
    """The start, among ``edges[:-1]``, of the ``length``-long window with the least integrated intensity
    that ends by ``edges[-1]``; ``values[i]`` holds on [edges[i], edges[i+1]). Intensity is constant within
    a piece, so one of these starts is optimal. Ties (to 1e-9) go to the earliest: a later start only adds
    risk. With no window that fits, ``edges[0]`` (start now)."""
    bounds = np.asarray(edges, dtype=float)
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(values, dtype=float) * np.diff(bounds))])
    starts = bounds[:-1][bounds[:-1] + length <= bounds[-1] + 1e-6]
    if starts.size == 0:
        return float(bounds[0])
    costs = np.interp(starts + length, bounds, cumulative) - np.interp(starts, bounds, cumulative)
    best = int(np.flatnonzero(costs <= costs.min() * (1 + 1e-9) + 1e-12)[0])
    return float(starts[best])
