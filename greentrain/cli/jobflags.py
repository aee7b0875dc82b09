"""The job flags of ``greentrain run``, ``train`` and ``demo``, generated from ``JobOptions``.

Each field of ``greentrain.job.options.JobOptions`` offered to a command is one
click option: ``--field-name`` (or the field's own spelling, e.g.
``--advise-only``), its type and ``Literal`` choices from the annotation, its
docstring as the help. A command may give its own default or a note for a
field (``greentrain run`` pauses by SIGSTOP unless told otherwise); it does not
declare the option again. Values not given on the command line stay out, so
the field's default (or a config file, under ``train``) applies, and a bad
value is one line naming its flag.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypedDict, TypeVar

import click

from greentrain.errors import ConfigError
from greentrain.fields import choices_in, field_docs, hints
from greentrain.job.options import FrontEnd, JobOptions, Setting, option_problems, settings_for

__all__ = ["job_flags", "section_flags", "take_settings", "job_options", "flag_of", "flag_argv"]

F = TypeVar("F", bound=Callable[..., object])

_CODE = re.compile(r"``([^`]+)``")


def flag_of(name: str) -> str:
    """The flag that sets field ``name``: ``--name-with-dashes`` or the field's own spelling."""
    for setting in settings_for():
        if setting.name == name and setting.flag is not None:
            return setting.flag[0]
    return "--" + name.replace("_", "-")


def _members(hint: object) -> list[object]:
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, type(int | None)) else (hint,)
    return [a for a in args if a is not type(None)]


class _Choices(click.Choice[str]):
    """A field's ``Literal`` choices, listed in the help; any word passes, so that ``JobOptions`` refuses a
    wrong one with the reason it gives from every other front end."""

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value)


class _Number(click.ParamType):
    """An int or float flag whose value, when it is not a number, passes as the word given, so that
    ``JobOptions`` refuses it with its own reason (the same as from ``Session`` or a config file)."""

    def __init__(self, kind: type[int] | type[float]) -> None:
        self.kind = kind
        self.name = "integer" if kind is int else "float"  # click's own names, shown in the help

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> object:
        if not isinstance(value, str):
            return value
        try:
            return self.kind(value)
        except ValueError:
            return value


class _ParamType(TypedDict, total=False):
    type: click.ParamType
    multiple: bool


def _param_type(setting: Setting) -> _ParamType:
    """click's ``type`` (and ``multiple``) for ``setting``'s annotation."""
    members = _members(setting.hint)
    if setting.choices:
        return {"type": _Choices([str(c) for c in setting.choices])}
    for kind in (int, float):
        if kind in members:
            return {"type": _Number(kind)}
    if str in members:
        return {"type": click.STRING}
    if Path in members:
        return {"type": click.Path(dir_okay=False)}
    for member in members:
        if typing.get_origin(member) in (tuple, list, Sequence):
            item = [a for a in typing.get_args(member) if a is not Ellipsis][0]
            return {"type": click.INT if item is int else click.STRING, "multiple": True}
    raise TypeError(f"JobOptions.{setting.name}: no command-line spelling for {setting.hint!r}")


def _option(setting: Setting, defaults: Mapping[str, object], notes: Mapping[str, str]) -> Callable[[F], F]:
    help_text = _CODE.sub(r"\1", " ".join(filter(None, (setting.doc, notes.get(setting.name)))))
    default = defaults.get(setting.name)
    show_default: bool | None = None  # click's own default: the context's setting
    if default is not None:
        show_default = True  # this command's own default: click passes it in and shows it
    elif setting.name not in defaults and setting.default is not None and not isinstance(setting.default, bool | tuple):
        help_text += f"  [default: {setting.default}]"  # the field's: applied by JobOptions (or a config file)
    if setting.flag is not None:
        spelling, value = setting.flag
        return click.option(spelling, setting.name, flag_value=value, default=default,
                            help=f"{setting.name} = {value!r}. {help_text}")
    flag = "--" + setting.name.replace("_", "-")
    if _members(setting.hint) == [bool]:
        spelling = f"{flag}/--no-{flag[2:]}" if setting.default is True else flag
        return click.option(spelling, setting.name, is_flag=True, default=default, help=help_text)
    return click.option(flag, setting.name, default=default, help=help_text, show_default=show_default,
                        **_param_type(setting))


def job_flags(front_end: FrontEnd, *, defaults: Mapping[str, object] | None = None,
              notes: Mapping[str, str] | None = None) -> Callable[[F], F]:
    """Add one option per ``JobOptions`` field ``front_end`` takes, in declaration order.

    ``defaults``: this command's own default of a field (given when the flag is not); ``notes``: a sentence
    appended to a field's help here."""
    options = [_option(s, defaults or {}, notes or {}) for s in settings_for(front_end)]

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def section_flags(sections: Mapping[str, type], keys: Mapping[str, tuple[str, str]], *,
                  spellings: Mapping[str, str] | None = None) -> Callable[[F], F]:
    """Add one option per ``keys`` entry (flag name -> ``(section, key)`` of a config file's sections, e.g. the
    runtime's ``[train]``): its type, ``Literal`` choices and help from that section's field, so a flag and
    its file key are one declaration. Not given, a flag stays out (None) and the file or preset decides; a
    boolean is ``--name/--no-name`` unless ``spellings`` gives its own."""
    options = []
    for name, (section, key) in keys.items():
        cls = sections[section]
        hint, doc = hints(cls)[key], field_docs(cls).get(key, "")
        setting = Setting(name=name, hint=hint, default=None, doc=doc, choices=choices_in(hint), flag=None)
        if _members(hint) == [bool]:
            flag = "--" + name.replace("_", "-")
            spelling = (spellings or {}).get(name, f"{flag}/--no-{flag[2:]}")
            options.append(click.option(spelling, name, default=None, help=_CODE.sub(r"\1", doc)))
        else:
            options.append(_option(setting, {}, {}))

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def take_settings(values: dict[str, object], front_end: FrontEnd) -> dict[str, object]:
    """Pop the job settings out of a command's keyword arguments; those not given stay out."""
    taken = {s.name: values.pop(s.name, None) for s in settings_for(front_end)}
    return {name: value for name, value in taken.items() if value is not None and value != ()}


def job_options(settings: Mapping[str, object], **fixed: object) -> JobOptions:
    """``JobOptions`` from flag values and a command's ``fixed`` settings; one line per bad flag."""
    problems = option_problems({**settings, **fixed})
    if problems:
        raise ConfigError("\n".join(f"{flag_of(name) if name in settings else name}: {why}"
                                    for name, why in problems))
    return JobOptions(**settings, **fixed)  # type: ignore[arg-type]


def flag_argv(name: str, value: object) -> list[str]:
    """The command-line words that give field ``name`` the ``value`` (to launch the same command again)."""
    setting = next(s for s in settings_for() if s.name == name)
    if setting.flag is not None:
        return [setting.flag[0]] if value == setting.flag[1] else []
    flag = flag_of(name)
    if isinstance(value, bool):
        return [flag] if value else ([f"--no-{flag[2:]}"] if setting.default is True else [])
    if isinstance(value, list | tuple):
        return [word for item in value for word in (flag, str(item))]
    return [flag, str(value)]
