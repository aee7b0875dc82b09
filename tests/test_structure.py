"""The import structure holds: no import circle between modules or between the package's parts, and the
engine is built in one place. Read statically from the source, imports inside functions included."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "greentrain"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The greentrain modules ``path`` imports: ``from a import b`` names module a.b where it is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, name, modules) for name, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def _part(module: str) -> str:
    """The part of the package a module belongs to: its first-level subpackage, or itself."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_module_imports_itself_round_a_circle() -> None:
    assert _circles(import_graph()) == []


def test_no_circle_between_the_parts_of_the_package() -> None:
    parts: dict[str, set[str]] = defaultdict(set)
    for module, imported in import_graph().items():
        if module == "greentrain":
            continue  # the package's face: it hands names on and is imported for __version__
        parts[_part(module)].update(_part(m) for m in imported if _part(m) != _part(module) and m != "greentrain")
    assert _circles(dict(parts)) == []


# The layers of docs/architecture.md, bottom (1) to top (9): a part imports its own layer and those below.
LAYERS: dict[str, int] = {
    **dict.fromkeys(("errors", "extras", "units", "terminal_bar", "hours", "windows", "exitcodes", "provenance", "jobstats", "data"), 1),  # data: files only
    **dict.fromkeys(("clock", "userfile", "plugins", "events", "fields", "tables"), 2),
    **dict.fromkeys(("signals", "device", "codecarbon"), 3),
    **dict.fromkeys(("policies", "monitor", "actuators", "exporters", "report", "testing"), 4),
    **dict.fromkeys(("profiler", "precision", "sim", "stageclocks", "fleet"), 5),
    "engine": 6,
    "job": 7,
    **dict.fromkeys(("session", "integrations", "runtime", "daemon", "demo"), 8),
    **dict.fromkeys(("cli", "__main__"), 9),
}


def test_every_part_has_a_layer_and_no_import_goes_up_one() -> None:
    graph = import_graph()
    parts = {m.split(".")[1] for m in graph if m != "greentrain"}
    assert sorted(parts - set(LAYERS)) == [], "a new part needs its layer here and in docs/architecture.md"
    upward = sorted(f"{module} -> {target}" for module, imported in graph.items() if module != "greentrain"
                    for target in imported if target != "greentrain"
                    and LAYERS[target.split(".")[1]] > LAYERS[module.split(".")[1]])
    assert upward == []
