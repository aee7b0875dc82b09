"""Shared fixtures: the test data shipped in tests/data, and the gpu marker."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
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


@pytest.fixture(autouse=True)
def _greentrain_environment_restored() -> Iterator[None]:
    """What one test's session exports for its relaunch (GREENTRAIN_STATE_FILE and the handshake
    variables) must not reach the next test in this process: put every GREENTRAIN_* variable back."""
    before = {k: v for k, v in os.environ.items() if k.startswith("GREENTRAIN_")}
    yield
    for key in [k for k in os.environ if k.startswith("GREENTRAIN_") and k not in before]:
        del os.environ[key]
    os.environ.update(before)


_ARCHIVE_ENV = "GREENTRAIN_FORECAST_ARCHIVE"
_ARCHIVE_KEY = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Signal chains record forecasts by default: the suite records into a temporary archive, never the
    user's cache (set here, so the commands tests start inherit it)."""
    if _ARCHIVE_ENV not in os.environ:
        folder = tempfile.mkdtemp(prefix="gt-test-archive-")
        os.environ[_ARCHIVE_ENV] = str(Path(folder) / "forecasts.sqlite")
        config.stash[_ARCHIVE_KEY] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_ARCHIVE_KEY, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(_ARCHIVE_ENV, None)


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
