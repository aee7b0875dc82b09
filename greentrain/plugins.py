"""Plugin families resolved by name through entry points: one mechanism for every seam.

A family is an entry-point group ``greentrain.<family>``:

- ``providers``: carbon-intensity providers (``make_provider('name')``),
- ``policies``: policy kinds (``[policy] kind = "name"``),
- ``gpu_backends``: GPU discovery backends (``greentrain.device.discover()`` asks each),
- ``exporters``: metrics exporters (the pull endpoint, the Pushgateway push).

The built-in table is ``[project.entry-points."greentrain.<family>"]`` in
greentrain's ``pyproject.toml`` and nowhere else: read from the source tree
when greentrain runs from one (so a checkout or an editable install whose
metadata predates an edit sees the current table), else from the installed
distribution's metadata. Third-party packages add entries by declaring the
same group; a built-in name cannot be replaced. An unknown name gets an error
listing the valid ones; a plugin whose optional dependency is missing gets an
error naming the package to install.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import import_module
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError
from greentrain.fields import did_you_mean

__all__ = ["FAMILIES", "available", "builtins", "load"]

FAMILIES: tuple[str, ...] = ("providers", "policies", "gpu_backends", "exporters")
"""The plugin families; each is the entry-point group ``greentrain.<family>``."""

_DIST = "greentrain"
_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _group(family: str) -> str:
    if family not in FAMILIES:
        raise ConfigError(f"unknown plugin family {family!r}; families: {', '.join(FAMILIES)}")
    return f"greentrain.{family}"


@functools.cache
def _source_table() -> dict[str, dict[str, str]] | None:
    """The entry-point tables of the source tree's pyproject.toml, or None when not run from a source tree."""
    try:
        project = tomllib.loads(_PYPROJECT.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if project.get("name") != _DIST:
        return None
    return {group: dict(table) for group, table in project.get("entry-points", {}).items()}


def builtins(family: str) -> dict[str, str]:
    """Map name -> 'module:attr' of the entries greentrain itself declares for ``family``."""
    group = _group(family)
    table = _source_table()
    if table is not None:
        return dict(table.get(group, {}))
    try:
        return {ep.name: ep.value for ep in distribution(_DIST).entry_points if ep.group == group}
    except PackageNotFoundError:  # pragma: no cover - neither a source tree nor installed
        return {}


def available(family: str) -> dict[str, str]:
    """Map name -> 'module:attr' for every entry of ``family``: built-ins, then other installed packages."""
    table = builtins(family)
    for ep in entry_points(group=_group(family)):
        dist = getattr(ep, "dist", None)
        if dist is not None and dist.name == _DIST:
            continue  # ours: the table above is the current one
        table.setdefault(ep.name, ep.value)
    return table


def load(family: str, name: str) -> Any:
    """The object entry ``name`` of ``family`` names (a class, usually); ConfigError naming the valid ones."""
    table = available(family)
    target = table.get(name)
    if target is None:
        valid = ", ".join(sorted(table)) or "(none installed)"
        what = {"providers": "carbon provider", "policies": "policy kind", "exporters": "exporter",
                "gpu_backends": "GPU backend"}.get(family, f"{family} entry")
        raise ConfigError(f"unknown {what} {name!r}{did_you_mean(name, table)}; valid: {valid}")
    module_name, _, attr = target.partition(":")
    try:
        module = import_module(module_name)
    except ImportError as e:
        raise ConfigError(
            f"{family} plugin {name!r} needs a package that is not installed ({e.name}); "
            "install the package that provides it"
        ) from e
    obj: object = module
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj
