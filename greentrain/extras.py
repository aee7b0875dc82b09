"""Optional dependencies: which extra brings which import, and one clear line when one is missing.

Core features import only ``[project].dependencies``. A feature built on a
package that only some users need (the fleet's MILP solver, a framework
integration, NVIDIA's bindings, the dashboard generator) lives behind an
extra; its module calls :func:`require` before importing, so a user without
the extra gets ``greentrain fleet needs scipy: pip install "greentrain[fleet]"``
instead of a traceback. ``tests/test_dependencies.py`` holds this table
against ``pyproject.toml`` and against every import in the package.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from types import MappingProxyType

from greentrain.errors import MissingExtraError

__all__ = ["EXTRA_OF_IMPORT", "require", "install_hint"]

EXTRA_OF_IMPORT: Mapping[str, str] = MappingProxyType({
    "scipy": "fleet",
    "pynvml": "nvidia",
    "transformers": "hf",
    "accelerate": "hf",
    "lightning": "lightning",
    "kubernetes": "k8s",
    "urllib3": "k8s",
    "grafana_foundation_sdk": "dashboards",
})
"""Top-level import name -> the extra of ``pyproject.toml`` that declares it."""


def install_hint(module: str) -> str:
    """The ``pip install`` that brings ``module``: its extra, or greentrain itself for a core one."""
    extra = EXTRA_OF_IMPORT.get(module.partition(".")[0])
    return f'pip install "greentrain[{extra}]"' if extra else "pip install greentrain"


def require(module: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` naming ``feature`` and the install when ``module`` is absent.

    ``feature`` is what the user asked for (``"greentrain fleet"``); the check
    finds the module without importing it, so the caller's own import follows.
    """
    top = module.partition(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtraError(f"{feature} needs {top}: {install_hint(top)}")
