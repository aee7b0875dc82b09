"""One entry-point mechanism: the built-in tables live in pyproject.toml only, plugins add by one line."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from greentrain import plugins
from greentrain.errors import ConfigError
from greentrain.policies import policy_kinds
from greentrain.signals import provider_names

ROOT = Path(__file__).resolve().parents[1]
TARGET = re.compile(r"greentrain(\.\w+)+:\w+")


def _pyproject_tables() -> dict[str, dict[str, str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {group.removeprefix("greentrain."): table for group, table in project["entry-points"].items()}


def test_every_family_has_its_builtins_in_pyproject_and_they_load() -> None:
    tables = _pyproject_tables()
    assert set(tables) == set(plugins.FAMILIES)
    for family in plugins.FAMILIES:
        assert plugins.builtins(family) == tables[family]
        for name in tables[family]:
            assert plugins.load(family, name) is not None
    assert provider_names() == sorted(tables["providers"])
    assert policy_kinds() == sorted(tables["policies"])


def test_no_module_keeps_a_second_table() -> None:
    """No 'greentrain.module:Attr' entry-point target is spelled anywhere in the package's code."""
    found = []
    for path in (ROOT / "greentrain").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and TARGET.fullmatch(node.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert found == []


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown carbon provider 'nope'; valid: csv, electricitymaps"):
        plugins.load("providers", "nope")
    with pytest.raises(ConfigError, match=r"unknown plugin family 'devices'; families: providers, policies"):
        plugins.available("devices")


def test_a_missing_optional_dependency_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.plugin_dist import install_plugin

    install_plugin(monkeypatch, tmp_path / "site", "needsdep", {"needsdep": "import not_installed_anywhere\n"},
                   {"greentrain.providers": {"needsdep": "needsdep:Provider"}})
    with pytest.raises(ConfigError, match=r"needs a package that is not installed \(not_installed_anywhere\)"):
        plugins.load("providers", "needsdep")


def test_a_plugin_cannot_replace_a_builtin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.plugin_dist import install_plugin

    install_plugin(monkeypatch, tmp_path / "site", "hijack", {"hijack": "class Provider:\n    pass\n"},
                   {"greentrain.providers": {"static": "hijack:Provider"}})
    assert plugins.available("providers")["static"] == "greentrain.signals.providers.static:StaticProvider"
