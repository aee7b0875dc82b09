"""Plugin families (providers, policies, devices, exporters) resolved by name.

Built-ins and third-party packages register under entry-point groups
``greentrain.<family>``; an unknown name gets an error listing the valid ones.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from greentrain.errors import ConfigError

__all__ = ["available", "load"]


def available(family: str) -> dict[str, str]:
    """Map plugin name -> 'module:attr' for the entry-point group ``greentrain.<family>``."""
    return {ep.name: ep.value for ep in entry_points(group=f"greentrain.{family}")}


def load(family: str, name: str, builtins: dict[str, str] | None = None) -> Any:
    """Load plugin ``name`` of ``family``; ``builtins`` are used when not installed as a dist."""
    table = dict(builtins or {})
    table.update(available(family))
    target = table.get(name)
    if target is None:
        valid = ", ".join(sorted(table)) or "(none installed)"
        raise ConfigError(f"unknown {family} entry {name!r}; valid: {valid}")
    module_name, _, attr = target.partition(":")
    try:
        module = __import__(module_name, fromlist=[attr or "_"])
    except ImportError as e:
        raise ConfigError(
            f"{family} plugin {name!r} needs a package that is not installed ({e.name}); "
            f"install it, e.g. pip install 'greentrain[{name}]'"
        ) from e
    return getattr(module, attr) if attr else module
