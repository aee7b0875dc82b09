"""docs/cli.md is generated from the CLI's own help and must not drift from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from greentrain.cli import COMMANDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


@pytest.fixture(scope="module")
def rendered() -> str:
    # A fresh process: click caches each command's help option on first use, so rendering
    # inside the test process would depend on which tests ran before.
    return subprocess.run([sys.executable, "-m", "greentrain.cli.reference"], capture_output=True,
                          text=True, check=True, timeout=120).stdout


def test_reference_covers_every_command(rendered: str) -> None:
    for name in COMMANDS:
        assert f"## `greentrain {name}`" in rendered, name


def test_committed_reference_is_current(rendered: str) -> None:
    assert DOC.read_text(encoding="utf-8") == rendered, (
        "docs/cli.md is stale: run `python -m greentrain.cli.reference > docs/cli.md`"
    )
