"""Fixtures of the daemon tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture()
def sockdir() -> Iterator[Path]:
    """A folder for the daemon's socket, under /tmp with mode 0755 so a setuid(nobody) child can reach it."""
    path = Path(tempfile.mkdtemp(prefix="gt-daemon-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
