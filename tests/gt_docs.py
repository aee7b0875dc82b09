"""The commands that README.md and docs/*.md tell people to type, read from the Markdown itself.

A command is a line of a fenced code block, or an inline code span of the
prose, that starts with ``greentrain SUBCOMMAND`` (a real subcommand, so help
text and output such as ``greentrain: done: ...`` are not commands),
``python -m greentrain...`` or ``torchrun ... -m greentrain``; a ``$ ``
prompt, ``VAR=value`` prefixes and ``\\`` continuations are understood. An
inline span is a command when it is complete: three words or more, no
placeholder in capitals (``greentrain monitor -- CMD`` is a synopsis), and
arguments its command accepts (``complete``: ``greentrain carbon skill`` or
``greentrain simulate --forecast-archive`` in a sentence name a command or a
flag; they are not commands to type).

The markers (docs/cli.md, "The documented commands are tested") are read from
the rest of the command's line:
- ``[needs network]``, ``[needs GPU]``, ``[needs root]``, ``[needs cluster]``: not run here;
- ``[runs until stopped]``: a server; it passes when it is still serving after a few seconds;
- ``[exits N]``: it shows an error on purpose and ends with status N.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DocCommand", "doc_commands", "doc_files", "SKIP_MARKERS", "SERVER_MARKER"]

SKIP_MARKERS = ("[needs network]", "[needs GPU]", "[needs root]", "[needs cluster]")
SERVER_MARKER = "[runs until stopped]"

_ENV = r"(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE = re.compile(r"`([^`]+)`")
_EXITS = re.compile(r"\[exits (\d+)\]")
_PLACEHOLDER = re.compile(r"(?<![\w-])[A-Z][A-Z_]{2,}(?![\w-])")


@dataclass(frozen=True, slots=True)
class DocCommand:
    """One documented command: where it is written, what it is, and what its line says about it."""

    file: str
    line: int
    command: str
    """The command, continuations joined, without its trailing comment."""
    markers: tuple[str, ...]
    exit_status: int = 0
    """The status the docs say it ends with (``[exits 2]`` on a command that shows an error on purpose)."""

    @property
    def skipped(self) -> bool:
        return any(m in self.markers for m in SKIP_MARKERS)

    @property
    def server(self) -> bool:
        return SERVER_MARKER in self.markers

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.command}"


def doc_files(root: Path) -> list[Path]:
    """README.md and every docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _markers(text: str) -> tuple[str, ...]:
    return tuple(m for m in (*SKIP_MARKERS, SERVER_MARKER) if m in text)


def _exit_status(text: str) -> int:
    found = _EXITS.search(text)
    return int(found.group(1)) if found else 0


def _strip_comment(command: str) -> str:
    """The command without a trailing ``# comment`` (a ``#`` inside quotes stays)."""
    quote = None
    for i, ch in enumerate(command):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "#" and quote is None and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command.rstrip()


def _is_command(text: str, subcommands: frozenset[str]) -> bool:
    text = re.sub(rf"^{_ENV}", "", text)
    if re.match(r"python3? -m greentrain(\.|\s|$)", text) or re.match(r"torchrun\s.*-m greentrain\b", text):
        return True
    words = text.split()
    return len(words) >= 2 and words[0] == "greentrain" and (words[1] in subcommands or words[1] in
                                                             ("--help", "-h", "--version"))


def doc_commands(root: Path, subcommands: frozenset[str],
                 complete: Callable[[str], bool] = lambda text: True) -> list[DocCommand]:
    """Every documented command of README.md and docs/*.md, in file order; ``complete(text)`` says whether an
    inline span's arguments make a whole command."""
    found: list[DocCommand] = []
    for path in doc_files(root):
        name = path.relative_to(root).as_posix()
        found += _fenced(name, path.read_text(encoding="utf-8").splitlines(), subcommands)
        found += _inline(name, path.read_text(encoding="utf-8").splitlines(), subcommands, complete)
    return sorted(found, key=lambda c: (c.file, c.line))


def _fenced(name: str, lines: list[str], subcommands: frozenset[str]) -> list[DocCommand]:
    out: list[DocCommand] = []
    fenced, pending, start, marks = False, "", 0, ""
    for number, line in enumerate(lines, 1):
        if _FENCE.match(line):
            fenced, pending = not fenced, ""
            continue
        if not fenced:
            continue
        text = line.strip()
        if pending:
            pending += " " + text
            marks += line
        elif _is_command(text.removeprefix("$ "), subcommands):
            pending, start, marks = text.removeprefix("$ "), number, line
        else:
            continue
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        out.append(DocCommand(name, start, _strip_comment(pending), _markers(marks), _exit_status(marks)))
        pending = ""
    return out


def _inline(name: str, lines: list[str], subcommands: frozenset[str],
            complete: Callable[[str], bool]) -> list[DocCommand]:
    out: list[DocCommand] = []
    fenced = False
    for number, line in enumerate(lines, 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith("#"):  # a heading names a command; it is not one to type
            continue
        for match in _INLINE.finditer(line):
            text = match.group(1).strip()
            whole = len(text.split()) >= 3 and not _PLACEHOLDER.search(text) and "..." not in text
            if whole and _is_command(text, subcommands) and complete(text):
                rest = line[match.end():]
                out.append(DocCommand(name, number, text, _markers(rest), _exit_status(rest)))
    return out
