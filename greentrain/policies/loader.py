"""Load policies from TOML files or preset names, with errors naming file, key and reason.

A policy file::

    [policy]
    kind = "forecast-optimal"   # a built-in or an entry point in greentrain.policies
    safety_z = 2.0              # the kind's parameters (see docs/policies.md)

    [power]                     # optional, for timing kinds: pick the operating point
    kind = "max-slowdown"
    max_slowdown = 0.1

    [settings]                  # optional, read by the engine: policy.settings
    pause_mode = "checkpoint"
    resume_overhead_s = 300
    deadline_policy = "strict"

Presets are such files shipped in ``greentrain/policies/presets``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar

from greentrain import plugins
from greentrain.errors import ConfigError
from greentrain.fields import did_you_mean
from greentrain.policies.base import Policy
from greentrain.policies.power import CompositePolicy
from greentrain.policies.settings import PolicySettings
from greentrain.tables import Problem, read_table
from greentrain.userfile import Problems, parse_toml, read_text

__all__ = ["PRESETS", "policy_kinds", "load_policy", "policy_from_mapping", "preset_text"]

_TOP_LEVEL = ("policy", "power", "settings")
T = TypeVar("T")


class _Dataclass(Protocol):
    """What marks a dataclass (a policy's Config, PolicySettings)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[object]]]


D = TypeVar("D", bound=_Dataclass)

PRESETS: tuple[str, ...] = tuple(
    sorted(f.name.removesuffix(".toml") for f in resources.files("greentrain.policies").joinpath("presets").iterdir()
           if f.name.endswith(".toml"))
)


def policy_kinds() -> list[str]:
    """Every policy kind: the built-ins (declared in pyproject.toml) and installed plugins."""
    return sorted(plugins.available("policies"))


def preset_text(name: str) -> str:
    """The TOML text of preset ``name``."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; presets: {', '.join(PRESETS)}")
    return resources.files("greentrain.policies").joinpath(f"presets/{name}.toml").read_text(encoding="utf-8")


def load_policy(spec: str | Path | Policy) -> Policy:
    """A Policy from a preset name, a TOML file path, or a Policy (returned as is).

    Raises ``ConfigError`` naming the file, the key and the reason.
    """
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, str) and spec in PRESETS:
        return _from_text(preset_text(spec), f"preset:{spec}")
    path = Path(spec)
    if path.suffix.lower() == ".toml" or path.exists():
        return _from_text(read_text(path, what="policy file"), str(path))
    raise ConfigError(f"unknown policy or preset {str(spec)!r}{did_you_mean(str(spec), PRESETS)}; presets: "
                      f"{', '.join(PRESETS)}; or a .toml file path")


def _from_text(text: str, source: str) -> Policy:
    return policy_from_mapping(parse_toml(text, source), source)


def policy_from_mapping(data: Mapping[str, object], source: str = "<policy>") -> Policy:
    """Build a policy from parsed TOML ``data``; ``source`` names it in errors.

    Every problem found is reported, one line each, in one ConfigError.
    """
    problems = Problems(source)
    for key in data:
        if key not in _TOP_LEVEL:
            problems.add(key, f"unknown table; expected {', '.join(_TOP_LEVEL)}")
    settings = _collect(problems, lambda: _build_dataclass(PolicySettings, _table(data, "settings", source),
                                                          source, "settings"))
    timing = _collect(problems, lambda: _build_policy(_table(data, "policy", source, required=True), source,
                                                      "policy", settings or PolicySettings()))
    power_table = _collect(problems, lambda: _table(data, "power", source))
    power = None
    if power_table:
        power = _collect(problems, lambda: _build_policy(power_table, source, "power", settings or PolicySettings()))
    problems.raise_if_any()
    assert timing is not None and settings is not None
    if power is None:
        return timing
    if timing.power_use != "none":
        raise ConfigError(f"{source}: power: {timing.name!r} already chooses the power limit; remove [power]")
    if power.power_use != "power":
        raise ConfigError(f"{source}: power.kind: {power.name!r} is not a power policy ({', '.join(_power_kinds())})")
    return CompositePolicy(timing, power, settings=settings)


def _power_kinds() -> list[str]:
    """The kinds whose ``power_use`` is "power" (those a [power] table may name)."""
    kinds = []
    for kind in policy_kinds():
        try:
            cls = plugins.load("policies", kind)
        except ConfigError:
            continue  # a plugin whose dependency is missing is not offered
        if isinstance(cls, type) and issubclass(cls, Policy) and cls.power_use == "power":
            kinds.append(kind)
    return kinds


def _collect(problems: Problems, build: Callable[[], T]) -> T | None:
    """``build()``, or None with its ConfigError lines added to ``problems``."""
    try:
        return build()
    except ConfigError as e:
        problems.extend(e)
        return None


def _table(data: Mapping[str, object], key: str, source: str, required: bool = False) -> dict[str, object]:
    value = data.get(key)
    if value is None:
        if required:
            raise ConfigError(f"{source}: {key}: missing table [{key}] (with kind = \"...\")")
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {key}: must be a table [{key}], got {type(value).__name__}")
    return value


def _build_policy(table: Mapping[str, object], source: str, prefix: str, settings: PolicySettings) -> Policy:
    kind = table.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ConfigError(f"{source}: {prefix}.kind: required, a policy name ({', '.join(policy_kinds())})")
    known = policy_kinds()
    if kind not in known:
        raise ConfigError(f"{source}: {prefix}.kind: unknown policy {kind!r}{did_you_mean(kind, known)}; "
                          f"valid: {', '.join(known)}")
    try:
        cls = plugins.load("policies", kind)
    except ConfigError as e:
        raise ConfigError(f"{source}: {prefix}.kind: {e}") from None
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise ConfigError(f"{source}: {prefix}.kind: {kind!r} does not name a Policy class")
    problems = Problems(source)
    description = table.get("description")
    if description is not None and not isinstance(description, str):
        problems.add(f"{prefix}.description", f"expected a string, got {description!r}")
    params = {k: v for k, v in table.items() if k not in ("kind", "description")}
    config_type = cls.Config
    if config_type is None:
        for key in params:
            problems.add(f"{prefix}.{key}", f"{kind!r} takes no parameters")
        problems.raise_if_any()
        policy = cls()
        policy.settings = settings
        return policy
    config = _collect(problems, lambda: _build_dataclass(config_type, params, source, prefix))
    problems.raise_if_any()
    configured: Callable[..., Policy] = cls  # a policy with a Config takes (config, settings=...)
    return configured(config, settings=settings)


def _build_dataclass(cls: type[D], params: Mapping[str, object], source: str, prefix: str) -> D:
    """Instantiate dataclass ``cls`` from TOML values (``greentrain.tables``: names, types, its own checks)."""
    problems: list[Problem] = []
    built = read_table(cls, params, prefix, problems)
    if built is None:
        raise ConfigError("\n".join(f"{source}: {key}: {why}" if key else f"{source}: {why}"
                                     for key, why in problems))
    return built
