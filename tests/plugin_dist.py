"""Install a tiny third-party distribution for a test: its modules and a ``*.dist-info`` with entry points.

What a ``pip install`` of a plugin package leaves in site-packages, written to
a directory put on ``sys.path``; ``importlib.metadata`` finds it like any
installed package. No greentrain file is touched.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest


def install_plugin(monkeypatch: pytest.MonkeyPatch, site: Path, dist: str, modules: dict[str, str],
                   entry_points: dict[str, dict[str, str]]) -> None:
    """Write ``modules`` (name -> source) and ``<dist>-0.1.dist-info`` declaring ``entry_points`` into ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source, encoding="utf-8")
        monkeypatch.delitem(sys.modules, name, raising=False)  # and dropped again after the test
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
    lines = []
    for group, table in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in table.items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
    if str(site) not in sys.path:
        monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
