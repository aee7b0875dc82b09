"""Reading a settings dataclass: the type, ``Literal`` choices and docstring of each field, from the class.

A settings class (``JobOptions``, the runtime's config sections) declares each
field once: its name, annotation, default and an attribute docstring. The
command-line generator and the readers of TOML files take what they need from
here, so a value is checked against its annotation by one rule wherever it
comes from, and a flag's help is the field's own docstring.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import functools
import inspect
import os
import sys
import textwrap
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = ["field_docs", "choices_in", "type_problem", "read_value", "describe", "did_you_mean",
           "hints"]

_UNION_TYPES = (typing.Union, types.UnionType)


class _TypeCheckingNames(dict[str, object]):
    """Names a module imports only for type checkers (``torch.nn.Module`` where torch is not imported) read as
    ``object``: nothing can be checked against them at run time."""

    def __init__(self, module_globals: Mapping[str, object]) -> None:
        super().__init__()
        self._globals = module_globals

    def __missing__(self, name: str) -> object:
        if name in self._globals or hasattr(builtins, name):
            raise KeyError(name)  # found in the module or the builtins, as usual
        return object


@functools.cache
def hints(cls: type) -> Mapping[str, object]:
    """The resolved annotation of each field of the dataclass ``cls``."""
    module = sys.modules.get(cls.__module__)
    return typing.get_type_hints(cls, localns=_TypeCheckingNames(vars(module) if module else {}))


@functools.cache
def field_docs(cls: type) -> Mapping[str, str]:
    """The attribute docstring of each field of ``cls``, whitespace collapsed ({} when no source is shipped)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    docs: dict[str, str] = {}
    statements = getattr(body, "body", [])
    for node, after in zip(statements, statements[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _members(hint: object) -> tuple[object, ...]:
    return typing.get_args(hint) if typing.get_origin(hint) in _UNION_TYPES else (hint,)


def choices_in(hint: object) -> tuple[object, ...]:
    """The ``Literal`` values ``hint`` allows (a bare ``bool`` counts as True and False), in order."""
    found: list[object] = []
    literals = [m for m in _members(hint) if typing.get_origin(m) is typing.Literal]
    if literals and bool in _members(hint):
        found += [True, False]
    for member in literals:
        found += [c for c in typing.get_args(member) if c not in found or type(c) is not bool]
    return tuple(found)


def describe(hint: object) -> str:
    """``hint`` for people: ``int | None``, ``'apply' | 'advise'``, ``a list of str``."""
    if typing.get_origin(hint) is typing.Literal:
        return " | ".join(repr(c) for c in typing.get_args(hint))
    if typing.get_origin(hint) in _UNION_TYPES:
        return " | ".join(describe(m) for m in typing.get_args(hint))
    origin = typing.get_origin(hint)
    if origin in (tuple, list, Sequence):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return f"a list of {describe(args[0]) if args else 'values'}"
    if hint is type(None):
        return "None"
    return getattr(hint, "__name__", str(hint))


def _fits(member: object, value: object) -> bool:
    origin = typing.get_origin(member)
    if member is type(None):
        return value is None
    if origin is typing.Literal:
        return any(value == c and type(value) is type(c) for c in typing.get_args(member))
    if member is bool:
        return isinstance(value, bool)
    if member is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if member is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if member is Path:
        return isinstance(value, str | os.PathLike)
    if origin in (tuple, list, Sequence):
        args = [a for a in typing.get_args(member) if a is not Ellipsis]
        return (isinstance(value, list | tuple) and not isinstance(value, str)
                and (not args or all(_fits(args[0], item) for item in value)))
    if origin in (dict, Mapping):
        return isinstance(value, dict)
    if member is object or member is typing.Any:
        return True
    if isinstance(member, type):
        if getattr(member, "_is_protocol", False) and not getattr(member, "_is_runtime_protocol", False):
            return value is not None  # a protocol that cannot be checked at run time: any object may do
        return isinstance(value, member)
    return True  # an annotation this reader cannot check (a TypeVar...): the field's own check decides


def type_problem(hint: object, value: object) -> str | None:
    """Why ``value`` does not fit ``hint`` (None when it does): a choice outside a ``Literal`` names the
    choices; any other mismatch names the expected type."""
    members = _members(hint)
    if any(_fits(m, value) for m in members):
        return None
    choices = choices_in(hint)
    if choices and any(type(value) is type(c) for c in choices):
        allowed = [repr(c) for c in choices]
        listed = allowed[0] if len(allowed) == 1 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
        return f"{value!r} is not {listed}"
    if isinstance(value, bool):
        return f"expected {describe(hint)}, got a boolean"
    return f"expected {describe(hint)}, got {type(value).__name__} {value!r}"


def read_value(hint: object, value: object) -> tuple[object, str | None]:
    """(``value`` as the field takes it, None) or (None, why it does not fit): an integer where only a float
    fits becomes a float (TOML writes 3 for 3.0), a list where a tuple fits a tuple, a string where a path fits
    (and no string) a path."""
    problem = type_problem(hint, value)
    if problem is not None:
        return None, problem
    members = _members(hint)
    if float in members and int not in members and isinstance(value, int) and not isinstance(value, bool):
        return float(value), None
    if isinstance(value, list) and any(typing.get_origin(m) is tuple for m in members):
        return tuple(value), None  # TOML has arrays, the field a tuple
    if isinstance(value, str) and Path in members and str not in members:
        return Path(value), None  # TOML has strings, the field a path
    return value, None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or ''."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
