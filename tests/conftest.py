"""Shared fixtures: the test data shipped in tests/data, and the gpu marker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = REPO_ROOT / "tests" / "data"
# Traces the package ships for the demo serve the tests too; tests/data holds the rest.
TRACE_DIRS = (TEST_DATA / "carbon", REPO_ROOT / "greentrain" / "data" / "carbon")


def find_trace(name: str) -> Path:
    """The path of a real carbon trace by file name; missing data is an error, never a skip."""
    for folder in TRACE_DIRS:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"test trace {name} is in none of {', '.join(str(d) for d in TRACE_DIRS)}")


@pytest.fixture(scope="session")
def carbon_trace() -> Callable[[str], Path]:
    """Look up a real Electricity Maps trace (tests/data/carbon or the package's own) by file name."""
    return find_trace


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_gpu = False
    try:  # NVML, not torch.cuda: CI's torch is a CPU build even where a GPU exists.
        import pynvml

        pynvml.nvmlInit()
        has_gpu = pynvml.nvmlDeviceGetCount() > 0
        pynvml.nvmlShutdown()
    except Exception:
        has_gpu = False
    if has_gpu:
        return
    skip_gpu = pytest.mark.skip(reason="needs a real NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
