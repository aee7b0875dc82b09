"""device/ <- actuators/ <- daemon/: no import (module-level or in a function) goes back down the layers."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "greentrain"
LAYERS = ("device", "actuators", "daemon")  # each may import those before it, never those after


def _imports(path: Path) -> set[str]:
    """greentrain modules ``path`` imports anywhere in it, except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(node) for block in ast.walk(tree)
                   if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                   for child in block.body for node in ast.walk(child)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("greentrain.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("greentrain."):
            found.add(node.module)
    return found


def test_no_layer_imports_a_higher_one() -> None:
    upward = []
    for rank, layer in enumerate(LAYERS):
        for path in (PACKAGE / layer).rglob("*.py"):
            for module in _imports(path):
                target = module.split(".")[1]
                if target in LAYERS and LAYERS.index(target) > rank:
                    upward.append(f"{path.relative_to(PACKAGE.parent)} imports {module}")
    assert upward == []


def test_advisory_and_controller_do_not_import_each_other() -> None:
    actuators = PACKAGE / "actuators"
    assert "greentrain.actuators.controller" not in _imports(actuators / "advisory.py")
    assert "greentrain.actuators.advisory" in _imports(actuators / "controller.py")
