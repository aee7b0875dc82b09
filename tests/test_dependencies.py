"""Every third-party module greentrain imports is declared: in the core dependencies, or in the extra
that ``greentrain.extras`` names for it; a feature whose extra is missing says so in one line.

A package that arrives only through another package's dependencies can vanish under a user at any
upgrade, and a CI that installs into a machine's own Python never notices: this test does.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from greentrain.extras import EXTRA_OF_IMPORT

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "greentrain"


def _name(requirement: str) -> str:
    """PEP 503 normalised distribution name of a requirement string."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {_name(r) for r in project["dependencies"]}
    extras = {extra: {_name(r) for r in reqs} for extra, reqs in project["optional-dependencies"].items()}
    return core, extras


def _imports(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(top-level module, line) of every absolute import, inside functions too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.partition(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.partition(".")[0], node.lineno


def _third_party() -> dict[str, list[str]]:
    """Third-party top-level import -> the places (``module.py:line``) that import it."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for top, line in _imports(tree):
            if top in sys.stdlib_module_names or top in ("greentrain", "__future__"):
                continue
            found.setdefault(top, []).append(f"{path.relative_to(ROOT)}:{line}")
    return found


def test_every_import_is_declared_in_core_or_in_its_extra() -> None:
    core, extras = _declared()
    providers = importlib.metadata.packages_distributions()
    problems = []
    for top, places in sorted(_third_party().items()):
        dists = {_name(d) for d in providers.get(top, [])}
        if not dists:
            problems.append(f"{places[0]}: imports {top}, which no installed distribution provides")
            continue
        extra = EXTRA_OF_IMPORT.get(top)
        allowed = core | (extras.get(extra, set()) if extra else set())
        if not dists & allowed:
            where = f"extra [{extra}]" if extra else "[project].dependencies"
            problems.append(f"{places[0]}: imports {top} ({', '.join(sorted(dists))}), not declared in {where}")
    assert not problems, "\n".join(problems)


def test_every_extra_named_in_the_table_exists_and_dev_installs_them_all() -> None:
    _core, extras = _declared()
    missing = sorted({e for e in EXTRA_OF_IMPORT.values() if e not in extras})
    assert not missing, f"greentrain/extras.py names extras pyproject.toml lacks: {missing}"
    uncovered = sorted(f"[{e}] {d}" for e, reqs in extras.items() if e != "dev" for d in reqs - extras["dev"])
    assert not uncovered, f"the dev extra (the README's test install) lacks: {uncovered}"


def _module_level_imports(tree: ast.Module) -> Iterator[tuple[str, int]]:
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from _imports(node)


def _required_before(tree: ast.Module, line: int) -> set[str]:
    """Modules passed to ``require("...")`` in module-level statements above ``line``."""
    names = set()
    for node in tree.body:
        if node.lineno >= line:
            break
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "require" and node.value.args
                and isinstance(node.value.args[0], ast.Constant)):
            names.add(str(node.value.args[0].value).partition(".")[0])
    return names


def test_a_module_importing_an_extra_at_load_checks_it_first() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for top, line in _module_level_imports(tree):
            if top in EXTRA_OF_IMPORT and top not in _required_before(tree, line):
                problems.append(f"{path.relative_to(ROOT)}:{line}: imports {top} at load without require()")
    assert not problems, "\n".join(problems)


# Runs the CLI with scipy hidden, as a user who installed greentrain without the [fleet] extra.
_WITHOUT_SCIPY = """
import sys
class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
from greentrain.cli import main
main(sys.argv[1:])
"""


@pytest.mark.timeout(120)
def test_fleet_without_its_extra_is_one_line_and_exit_2() -> None:
    jobs = PACKAGE / "data" / "fleet" / "example-jobs.csv"
    trace = PACKAGE / "data" / "carbon" / "GB_2022_hourly.csv"
    run = subprocess.run([sys.executable, "-c", _WITHOUT_SCIPY, "fleet", "simulate", "--jobs", str(jobs),
                          "--trace", str(trace), "--capacity-gpus", "16"],
                         capture_output=True, text=True, timeout=100)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip() == 'greentrain: error: greentrain fleet needs scipy: pip install "greentrain[fleet]"'
    assert "Traceback" not in run.stderr
