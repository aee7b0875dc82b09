"""One reader for every file a user hands us: policies, configs, traces, state files.

Everything a user names on the command line or in a config goes through
:func:`read_text` (or :func:`load_toml` / :func:`load_json` on top of it), so
every such file gets the same checks, in this order, before a byte is parsed:

* it is a regular file: a FIFO, socket, device or directory is refused from
  ``stat`` alone, and the open itself is non-blocking, so a FIFO that appears
  between the two checks cannot hang us either;
* it is no larger than a cap (a config is kilobytes; a year of hourly trace a
  megabyte), so a wrong path to a disk image fails at once;
* it is UTF-8, with or without a byte-order mark; any other encoding (UTF-16,
  Latin-1, binary) is named, with the fix: "save it as UTF-8";
* TOML nesting is bounded before the parser sees it, so a deeply nested array
  is an error message, not a ``RecursionError``.

Errors are :class:`~greentrain.errors.ConfigError` naming the file (and line and
column where there is one) and the reason; :class:`Problems` collects several
for one file so a user fixes them all in one go.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import stat
import tomllib
from pathlib import Path
from datetime import date, datetime, time
from typing import TypeAlias

from greentrain.errors import ConfigError

__all__ = [
    "CONFIG_MAX_BYTES",
    "TRACE_MAX_BYTES",
    "LOG_MAX_BYTES",
    "MAX_TOML_DEPTH",
    "Problems",
    "read_bytes",
    "read_text",
    "decode_text",
    "load_toml",
    "parse_toml",
    "load_json",
    "check_writable_dir",
    "JSONValue",
    "JSONObject",
    "TOMLValue",
    "TOMLTable",
]

CONFIG_MAX_BYTES = 1 << 20
"""Cap for TOML and JSON files (1 MiB: real ones are a few kB)."""
TRACE_MAX_BYTES = 64 << 20
"""Cap for carbon-trace CSVs (64 MiB: a year of hourly rows is about 1 MB)."""
LOG_MAX_BYTES = 1 << 30
"""Cap for JSONL run logs read back (reports): a week of 1 Hz samples is well under it."""
MAX_TOML_DEPTH = 32
"""Deepest array/inline-table nesting accepted in TOML (configs use 2 or 3)."""

JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
"""One JSON value as ``json.loads`` gives it."""
JSONObject: TypeAlias = "dict[str, JSONValue]"
"""A JSON object (a daemon message, a state file, a run-log event)."""
TOMLValue: TypeAlias = "str | int | float | bool | datetime | date | time | list[TOMLValue] | dict[str, TOMLValue]"
"""One TOML value as ``tomllib`` gives it."""
TOMLTable: TypeAlias = "dict[str, TOMLValue]"
"""A TOML table (a whole file, or a ``[section]``)."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class Problems:
    """Several problems in one input, each a line naming ``source``, the key and the reason.

    ``add(key, reason)`` records one; ``raise_if_any()`` raises one ConfigError
    whose message has one line per problem.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: list[str] = []

    def add(self, key: str | None, reason: str) -> None:
        self.lines.append(f"{self.source}: {key}: {reason}" if key else f"{self.source}: {reason}")

    def extend(self, error: ConfigError) -> None:
        """Take the lines of an error already formatted with its source."""
        self.lines.extend(str(error).splitlines())

    def __bool__(self) -> bool:
        return bool(self.lines)

    def raise_if_any(self) -> None:
        if self.lines:
            raise ConfigError("\n".join(self.lines))


def _kind_of(mode: int) -> str | None:
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def read_bytes(path: str | Path, *, what: str = "file", max_bytes: int = CONFIG_MAX_BYTES) -> bytes:
    """The bytes of regular file ``path``; ConfigError naming the file otherwise.

    ``what`` says what the file is for ("policy file", "trace") in messages.
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read {what} ({e.strerror or e})") from None
    kind = _kind_of(info.st_mode)
    if kind is not None:
        raise ConfigError(f"{path}: {what} is {kind}; give a regular file")
    if info.st_size > max_bytes:
        raise ConfigError(f"{path}: {what} is {info.st_size:,} bytes, over the {max_bytes:,}-byte limit; "
                          "is this the right file?")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read {what} ({e.strerror or e})") from None
    try:
        kind = _kind_of(os.fstat(fd).st_mode)  # swapped for a FIFO since the stat above
        if kind is not None:
            raise ConfigError(f"{path}: {what} is {kind}; give a regular file")
        chunks = []
        total = 0
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if total > max_bytes:
                raise ConfigError(f"{path}: {what} is over the {max_bytes:,}-byte limit; is this the right file?")
            chunks.append(chunk)
    except OSError as e:
        reason = "is a directory" if e.errno == errno.EISDIR else (e.strerror or str(e))
        raise ConfigError(f"{path}: cannot read {what} ({reason})") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def decode_text(data: bytes, source: str, *, secret: bool = False) -> str:
    """UTF-8 text (a leading BOM dropped); ConfigError saying which encoding to save in otherwise.

    ``secret=True`` (API keys): the message names the file only, never a byte or a position of it.
    """
    fix = "save it as UTF-8"
    if secret:
        try:
            return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{source}: not UTF-8 text; {fix}") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{source}: file is UTF-16 (byte-order mark), not UTF-8; {fix}")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\x00" in data[:4096]:
        head = data[:4096]
        if head[1::2].count(0) > len(head) // 4 or head[0::2].count(0) > len(head) // 4:
            raise ConfigError(f"{source}: file looks like UTF-16 without a byte-order mark, not UTF-8; {fix}")
        raise ConfigError(f"{source}: binary data (NUL bytes), not a UTF-8 text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        guess = "Latin-1/Windows-1252" if _looks_latin1(data) else "an unknown encoding or binary"
        raise ConfigError(f"{source}:{line}:{col}: byte 0x{data[e.start]:02x} is not UTF-8 "
                          f"(the file looks like {guess}); {fix}") from None


def _looks_latin1(data: bytes) -> bool:
    """Mostly printable text once read as Windows-1252: an editor's legacy encoding, not binary."""
    text = data.decode("cp1252", errors="replace")
    printable = sum(ch.isprintable() or ch in "\r\n\t" for ch in text)
    return printable >= 0.95 * len(text)


def read_text(path: str | Path, *, what: str = "file", max_bytes: int = CONFIG_MAX_BYTES,
              secret: bool = False) -> str:
    """The UTF-8 text of regular file ``path`` (see the module docstring for the checks)."""
    return decode_text(read_bytes(path, what=what, max_bytes=max_bytes), str(path), secret=secret)


def _toml_depth_error(text: str, limit: int) -> tuple[int, int] | None:
    """(line, col) where bracket nesting outside strings and comments first exceeds ``limit``, else None.

    tomllib parses arrays and inline tables recursively; deep enough nesting
    exhausts the interpreter stack, so the depth is measured before parsing.
    """
    depth = 0
    i, n, line, line_start = 0, len(text), 1, 0
    while i < n:
        ch = text[i]
        if ch == "\n":
            line, line_start = line + 1, i + 1
        elif ch == "#":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        elif ch in "\"'":
            triple = text.startswith(ch * 3, i)
            end_mark = ch * 3 if triple else ch
            j = i + len(end_mark)
            while j < n:
                if ch == '"' and text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(end_mark, j) or (not triple and text[j] == "\n"):
                    break
                j += 1
            if triple:
                while text.startswith(ch, j + 3):  # up to two quotes may close a multi-line string
                    j += 1
            line += text.count("\n", i, j)
            if "\n" in text[i:j]:
                line_start = text.rfind("\n", i, j) + 1
            i = j + len(end_mark)
            continue
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return line, i - line_start + 1
        elif ch in "]}":
            depth = max(0, depth - 1)
        i += 1
    return None


def parse_toml(text: str, source: str, *, max_depth: int = MAX_TOML_DEPTH) -> TOMLTable:
    """Parse TOML ``text``; ConfigError naming ``source``, line and column otherwise."""
    where = _toml_depth_error(text, max_depth)
    if where is not None:
        raise ConfigError(f"{source}:{where[0]}:{where[1]}: arrays or tables nested more than {max_depth} deep")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # Python 3.11's error has no line attributes; its message ends "(at line L, column C)".
        found = re.search(r"^(.*) \(at line (\d+), column (\d+)\)$", str(e))
        if found:
            raise ConfigError(f"{source}:{found[2]}:{found[3]}: invalid TOML: {found[1]}") from None
        raise ConfigError(f"{source}: invalid TOML: {e}") from None
    except RecursionError:  # a construct the depth scan above missed: still one line
        raise ConfigError(f"{source}: TOML nested too deeply") from None


def load_toml(path: str | Path, *, what: str = "TOML file", max_bytes: int = CONFIG_MAX_BYTES) -> TOMLTable:
    """Read and parse the TOML file at ``path`` with every check of :func:`read_text`."""
    return parse_toml(read_text(path, what=what, max_bytes=max_bytes), str(path))


def load_json(path: str | Path, *, what: str = "JSON file", max_bytes: int = CONFIG_MAX_BYTES) -> JSONValue:
    """Read and parse the JSON file at ``path``; ConfigError naming file, line and column."""
    text = read_text(path, what=what, max_bytes=max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}:{e.colno}: {what} is not valid JSON ({e.msg})") from None
    except RecursionError:
        raise ConfigError(f"{path}: {what}: JSON nested too deeply") from None


def check_writable_dir(path: str | Path, *, what: str) -> Path:
    """Create ``path`` if needed and prove it writable by creating and removing a probe file.

    Called before the first step so a read-only or full folder fails at once,
    not at the first save after hours of work. ``what`` names the source
    (``--out``, ``config.toml: checkpoint.dir``) in the error.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{what}: {folder} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{what}: cannot create folder {folder} ({e.strerror or e})") from None
    if not folder.is_dir():
        raise ConfigError(f"{what}: {folder} is not a folder")
    # Host and pid in the name: ranks on several nodes may probe one shared folder at once.
    probe = folder / f".greentrain-write-probe-{socket.gethostname()}-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b"probe")
        finally:
            os.close(fd)
        os.unlink(probe)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(probe)
        raise ConfigError(f"{what}: folder {folder} is not writable ({e.strerror or e})") from None
    return folder

