"""Every parallel layout reproduces the single-process fp32 run: loss AND pre-clip gradient norm.

All layouts of one world size run inside one forked process group (start-up
paid once). Every rank must report the same global metrics.
"""

from __future__ import annotations

import pytest

from .harness import run_ranks
from .layouts import LAYOUTS, compare, reference, run_layouts

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def ref():
    return reference()


_RESULTS: dict[int, list[dict]] = {}


def _results(world: int) -> list[dict]:
    if world not in _RESULTS:
        _RESULTS[world] = run_ranks(run_layouts, world, list(LAYOUTS[world]), timeout_s=240)
    return _RESULTS[world]


CASES = [(world, name) for world in sorted(LAYOUTS) for name in LAYOUTS[world]]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("world", "name"), CASES, ids=[f"{w}ranks-{n}" for w, n in CASES])
def test_layout_matches_single_process(ref, world: int, name: str) -> None:
    per_rank = _results(world)
    for rank, results in enumerate(per_rank):
        compare(ref, results[name], f"{name} (rank {rank} of {world})")


@pytest.mark.timeout(60)
def test_reference_learns(ref) -> None:
    # Guards the guard: a reference that does not train would make every comparison vacuous.
    losses = [loss for loss, _ in ref]
    assert losses[-1] < losses[0] - 0.3
    assert all(norm > 0 for _, norm in ref)
