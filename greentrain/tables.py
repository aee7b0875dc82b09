"""Reading a TOML table into a settings dataclass: the one reader of runtime configs, policy files and the
daemon's config.

A table becomes one dataclass. A key the class does not declare is named with
the closest one it does; a value is read against the field's annotation
(``fields.read_value``, the rule ``JobOptions`` uses too); then the class's own
checks (its ``__post_init__``) run on the values that were read. Every problem
comes back as ``(key, why)``, so a file's problems are reported together, one
line each, whichever of these files they are in.

A class's checks raise ``ConfigError("field: why")`` for the first bad value,
or ``InvalidConfig`` with every ``(key, why)`` at once; for the first kind each
value is also tried alone, so that every bad value is found in one pass.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TypeVar, cast

from greentrain.errors import ConfigError, InvalidConfig
from greentrain.fields import did_you_mean, hints, read_value

__all__ = ["Problem", "read_table"]

T = TypeVar("T")

Problem = tuple[str, str]
"""``(key, why)``: the key as the file names it (``section.key``; '' for the file itself) and the reason."""


def _key(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def read_table(cls: type[T], table: Mapping[str, object], prefix: str, problems: list[Problem], *,
               defaults: Mapping[str, object] | None = None) -> T | None:
    """``cls`` built from ``table``, whose keys the file spells ``prefix.key``; None when anything was wrong,
    with each problem appended to ``problems``. ``defaults``: values the reader gives where the table is silent
    (a section's defaults that differ from the class's own)."""
    types = hints(cast(type, cls))  # cached by class
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]  # cls is a dataclass
    values: dict[str, object] = dict(defaults or {})
    found = len(problems)
    for key, raw in table.items():
        if key not in types:
            problems.append((_key(prefix, key), f"unknown key{did_you_mean(key, names)}; valid: "
                                                f"{', '.join(names) or '(none)'}"))
            continue
        value, why = read_value(types[key], raw)
        if why is None and isinstance(value, float) and not math.isfinite(value):
            why = f"must be a finite number, got {raw}"
        if why is not None:
            problems.append((_key(prefix, key), why))
        else:
            values[key] = value
    built = _build(cls, values, prefix, problems)
    return built if len(problems) == found else None


def _build(cls: type[T], values: dict[str, object], prefix: str, problems: list[Problem]) -> T | None:
    """``cls(**values)``, its checks' problems appended (each value also alone, to find every bad one)."""
    try:
        return cls(**values)
    except InvalidConfig as e:  # keys the class named itself, bare ('port') or in full ('metrics.port')
        problems.extend((key if not prefix or key == prefix or key.startswith(f"{prefix}.") else _key(prefix, key), why)
                        for key, why in e.problems)
        return None
    except ConfigError as e:
        whole = str(e)
    except TypeError as e:  # a required key missing
        missing = [f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                   if f.name not in values and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        problems.append((prefix, f"missing {', '.join(missing)}" if missing else str(e)))
        return None
    named = []
    for key, value in values.items():
        try:
            cls(**{key: value})
        except ConfigError as e:
            if str(e).startswith(f"{key}: "):
                named.append((_key(prefix, key), str(e).removeprefix(f"{key}: ")))
        except TypeError:
            pass  # the class has required fields: only the whole construction can say
    if not named:  # a check across fields: the class names the fields itself
        key, sep, why = whole.partition(": ")
        named = [(_key(prefix, key), why) if sep and key in values else (prefix, whole)]
    problems.extend(named)
    return None
