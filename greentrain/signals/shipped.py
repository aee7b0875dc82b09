"""The carbon traces greentrain ships, found by name from any directory.

``csv:GB_2022`` (or ``csv:GB_2022_hourly.csv``, or the repository path
``csv:greentrain/data/carbon/GB_2022_hourly.csv``) names the copy inside the
installed package (``greentrain/data/carbon``), so the docs' commands work
from any working directory. A path that exists is always read as given; one
that neither exists nor names a shipped trace is refused with one line that
lists the shipped names.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path, PurePath

from greentrain.errors import ConfigError

__all__ = ["shipped_traces", "resolve_trace", "trace_names_hint"]

_SUFFIX = "_hourly"
_SHIPPED_PARENT = ("greentrain", "data", "carbon")


def shipped_traces() -> dict[str, Path]:
    """Short name ('GB_2022') -> the shipped file, for every trace in ``greentrain/data/carbon``."""
    folder = Path(str(resources.files("greentrain.data").joinpath("carbon")))
    return {_short(path.name): path for path in sorted(folder.glob("*.csv")) if path.is_file()}


def _short(name: str) -> str:
    return name.removesuffix(".csv").removesuffix(_SUFFIX)


def trace_names_hint() -> str:
    """The shipped names, as the user would type them."""
    return ", ".join(f"csv:{name}" for name in shipped_traces())


def _shipped_for(spec: str) -> Path | None:
    given = PurePath(spec)
    if len(given.parts) > 1 and tuple(given.parent.parts[-3:]) != _SHIPPED_PARENT:
        return None  # another folder: a path the user meant, never swapped for ours
    traces = shipped_traces()
    return traces.get(_short(given.name))


def resolve_trace(spec: str | Path) -> Path:
    """The file ``spec`` names: itself when it exists, else the shipped trace of that name; ConfigError
    naming ``spec`` and the shipped names when it is neither."""
    path = Path(spec).expanduser()
    if path.exists():
        return path
    shipped = _shipped_for(str(spec))
    if shipped is not None:
        return shipped
    raise ConfigError(f"csv:{spec}: cannot read trace (no such file, and not a shipped trace); "
                      f"shipped: {trace_names_hint()}, or give the path of an Electricity Maps CSV export")
