"""A small builder for sparse LP/MILP models, solved by HiGHS through ``scipy.optimize.milp``.

Variables are added in blocks (numpy arrays of costs and bounds), rows one
at a time or many at once from (row, column, value) triplets; the matrix is
assembled once, in CSR form, when the model is solved.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from greentrain.extras import require

require("scipy", "greentrain fleet")
from scipy.optimize import Bounds, LinearConstraint, milp  # noqa: E402 - after the extra's check
from scipy.sparse import csr_array  # noqa: E402 - after the extra's check

__all__ = ["LinearModel", "Solution"]


@dataclass(frozen=True, slots=True)
class Solution:
    """A solved model: ``x`` is None when no feasible point was found."""

    x: np.ndarray | None
    objective: float
    status: int
    """scipy's status: 0 optimal, 1 iteration or time limit, 2 infeasible, 3 unbounded, 4 other."""
    solve_s: float

    @property
    def ok(self) -> bool:
        return self.x is not None


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Keep the solver's own C-level prints off standard output (some HiGHS builds print MIP debug
    lines there even when asked for no output), so ``--json`` output stays one JSON object."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        yield  # not a real file (a test's capture): nothing at the C level to protect
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


class LinearModel:
    """Minimise ``cost @ x`` subject to row bounds and variable bounds; some variables integral."""

    def __init__(self) -> None:
        self._cost: list[np.ndarray] = []
        self._lb: list[np.ndarray] = []
        self._ub: list[np.ndarray] = []
        self._int: list[np.ndarray] = []
        self.size = 0
        self._sizes: list[np.ndarray] = []  # entries per row, one array per block of rows
        self._cols: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []
        self._row_lb: list[np.ndarray] = []
        self._row_ub: list[np.ndarray] = []

    def add(self, cost: np.ndarray | list[float], lb: np.ndarray | float, ub: np.ndarray | float, *,
            integral: bool = False) -> np.ndarray:
        """Add ``len(cost)`` variables; return their indices."""
        cost = np.asarray(cost, dtype=float)
        n = cost.size
        self._cost.append(cost)
        self._lb.append(np.broadcast_to(np.asarray(lb, dtype=float), (n,)))
        self._ub.append(np.broadcast_to(np.asarray(ub, dtype=float), (n,)))
        self._int.append(np.full(n, 1 if integral else 0, dtype=np.uint8))
        index = np.arange(self.size, self.size + n)
        self.size += n
        return index

    def row(self, cols: np.ndarray | list[int], vals: np.ndarray | list[float] | float, lb: float = -np.inf,
            ub: float = np.inf) -> None:
        """Add the constraint ``lb <= sum(vals * x[cols]) <= ub``."""
        cols = np.asarray(cols, dtype=np.int64)
        if cols.size == 0:
            return
        self._sizes.append(np.array([cols.size]))
        self._cols.append(cols)
        self._vals.append(np.broadcast_to(np.asarray(vals, dtype=float), cols.shape))
        self._row_lb.append(np.array([lb], dtype=float))
        self._row_ub.append(np.array([ub], dtype=float))

    def rows(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, lb: np.ndarray | float,
             ub: np.ndarray | float) -> None:
        """Add rows ``0..max(rows)`` of a block from triplets (each row number must occur)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        order = np.argsort(rows, kind="stable")
        count = int(rows.max()) + 1
        self._sizes.append(np.bincount(rows, minlength=count))
        self._cols.append(np.asarray(cols, dtype=np.int64)[order])
        self._vals.append(np.asarray(vals, dtype=float)[order])
        self._row_lb.append(np.broadcast_to(np.asarray(lb, dtype=float), (count,)))
        self._row_ub.append(np.broadcast_to(np.asarray(ub, dtype=float), (count,)))

    def integral(self) -> np.ndarray:
        """Indices of the integral variables."""
        return np.flatnonzero(np.concatenate(self._int)) if self._int else np.zeros(0, dtype=int)

    def solve(self, *, time_limit_s: float, mip_rel_gap: float = 1e-4, relax: bool = False,
              fixed: dict[int, float] | None = None, interior: bool = False,
              mip_abs_gap: float | None = None, integral_only: np.ndarray | None = None) -> Solution:
        """Solve with HiGHS; the best point found within the time limit is returned.

        ``relax``: ignore integrality (the LP relaxation). ``fixed``: variables held at a value.
        ``interior``: an LP by HiGHS's interior-point method without crossover (far faster than simplex on
        hundreds of thousands of columns; the point is optimal but need not be a vertex). ``mip_abs_gap``:
        HiGHS's absolute gap (its default, 1e-6, when None). ``integral_only``: of the integral variables,
        only these stay integral (the rest are relaxed)."""
        began = time.process_time()
        if self.size == 0:
            return Solution(np.zeros(0), 0.0, 0, 0.0)
        cost = np.concatenate(self._cost)
        integrality = np.concatenate(self._int) * (0 if relax else 1)
        if integral_only is not None:
            kept = np.zeros_like(integrality)
            kept[integral_only] = integrality[integral_only]
            integrality = kept
        lower, upper = np.concatenate(self._lb), np.concatenate(self._ub)
        if fixed:
            index = np.fromiter(fixed, dtype=np.int64)
            lower[index] = upper[index] = np.fromiter(fixed.values(), dtype=float)
        constraints = []
        if self._sizes:
            indptr = np.concatenate([[0], np.cumsum(np.concatenate(self._sizes))])
            matrix = csr_array((np.concatenate(self._vals), np.concatenate(self._cols), indptr),
                               shape=(indptr.size - 1, self.size))
            constraints.append(LinearConstraint(matrix, np.concatenate(self._row_lb), np.concatenate(self._row_ub)))
        options: dict[str, float | bool | str] = {"time_limit": time_limit_s, "presolve": True}
        if integrality.any():
            options["mip_rel_gap"] = mip_rel_gap
            if mip_abs_gap is not None:  # passed on to HiGHS like ``interior``'s options below
                options["mip_abs_gap"] = mip_abs_gap
        elif interior:  # HiGHS options milp passes on verbatim (with a warning that they are not its own)
            options |= {"solver": "ipm", "run_crossover": "off"}
        with _quiet_stdout() if integrality.any() else contextlib.nullcontext(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Unrecognized options", RuntimeWarning)
            result = milp(cost, integrality=integrality if integrality.any() else None,
                          bounds=Bounds(lower, upper), constraints=constraints, options=options)
        x = None if result.x is None else np.asarray(result.x)
        objective = float(result.fun) if result.fun is not None else float("nan")
        return Solution(x, objective, int(result.status), time.process_time() - began)
