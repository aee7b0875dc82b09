"""docs/architecture.md describes the code as it is: every package and module of greentrain/ is in its module
map (a row per package, its modules named in it), and every row names a module that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "greentrain"
DOC = ROOT / "docs" / "architecture.md"


def _module_map() -> dict[str, set[str]]:
    """``{"engine/": {"loop.py", ...}, "greentrain/": {...}}`` from the module map's table rows."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Module map", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 3 or not re.fullmatch(r"\s*`[\w/]+/`\s*", cells[1]):
            continue
        rows[cells[1].strip().strip("`")] = set(re.findall(r"`(\w+\.py)`", cells[2]))
    return rows


def _tree() -> dict[str, set[str]]:
    """The same map read from the package: each folder with Python files, and its modules."""
    tree: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        folder = path.parent.relative_to(PACKAGE).as_posix()
        tree.setdefault("greentrain/" if folder == "." else f"{folder}/", set()).add(path.name)
    return tree


def test_every_package_and_module_is_in_the_architecture_doc() -> None:
    documented, tree = _module_map(), _tree()
    missing_packages = sorted(set(tree) - set(documented))
    assert missing_packages == [], f"packages missing from docs/architecture.md's module map: {missing_packages}"
    missing = sorted(f"{package}{module}" for package, modules in tree.items()
                     for module in modules - {"__init__.py"} - documented[package])
    assert missing == [], f"modules missing from docs/architecture.md's module map: {missing}"


def test_the_architecture_doc_names_no_module_that_is_gone() -> None:
    documented, tree = _module_map(), _tree()
    assert sorted(set(documented) - set(tree)) == []
    gone = sorted(f"{package}{module}" for package, modules in documented.items()
                  for module in modules - tree.get(package, set()))
    assert gone == [], f"docs/architecture.md names modules that do not exist: {gone}"
