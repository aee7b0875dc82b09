"""Fixtures for integration tests: a real single-node Slurm cluster, synthetic trace files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gt_slurm_cluster import SlurmCluster, slurm_missing

from gt_trace import write_trace  # noqa: E402,F401  (re-exported for fixtures)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A running single-node cluster (partitions ``uk`` default and ``de``)."""
    why = slurm_missing()
    if why:
        pytest.skip(why)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
