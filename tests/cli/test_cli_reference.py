"""docs/cli.md is generated from the CLI's own help and must not drift from it."""

from __future__ import annotations

from pathlib import Path

from greentrain.cli import COMMANDS
from greentrain.cli.reference import render_reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_reference_covers_every_command() -> None:
    text = render_reference()
    for name in COMMANDS:
        assert f"## `greentrain {name}`" in text, name


def test_committed_reference_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render_reference(), (
        "docs/cli.md is stale: run `python -m greentrain.cli.reference > docs/cli.md`"
    )
