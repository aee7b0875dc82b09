"""Reading an HTTP body we do not trust: capped, decompressed under the cap, parsed with bounded depth.

A hostile or broken server can send a body far larger than any real answer,
a gzip bomb that inflates a megabyte into gigabytes, JSON nested thousands
deep (Python's parser recurses) or numbers hundreds of digits long. Each of
those becomes a ``BodyError`` here, before memory grows or the stack runs out;
the HTTP client turns it into a ``SignalError`` naming the provider.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterable
from typing import NoReturn

from greentrain.userfile import JSONValue

__all__ = ["BodyError", "MAX_BODY_BYTES", "MAX_JSON_DEPTH", "read_capped", "loads_bounded", "json_depth_exceeds"]

MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest body accepted, compressed and decompressed (a 72 h forecast is ~20 KiB)."""
MAX_JSON_DEPTH = 64
"""Deepest nesting accepted (real answers nest 4 levels)."""
_MAX_NUMBER_CHARS = 40
"""Longest JSON number literal accepted; longer ones cannot be a carbon intensity or a period."""

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class BodyError(ValueError):
    """The body is too large, badly compressed or unsafe to parse; the message says which."""


class _Inflater:
    """Decompresses one Content-Encoding chunk by chunk, never producing more than ``cap`` bytes."""

    def __init__(self, encoding: str, cap: int) -> None:
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self._zlib = None
        elif encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)
        else:
            raise BodyError(f"unsupported Content-Encoding {encoding[:20]!r} (we ask for gzip or deflate)")
        self._cap = cap
        self.produced = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._zlib is None:
            return [self._count(chunk)]
        parts, data = [], chunk
        try:
            while data:
                # max_length bounds each step's output: a bomb stops at the cap, not after inflating.
                parts.append(self._count(self._zlib.decompress(data, self._cap - self.produced + 1)))
                data = self._zlib.unconsumed_tail
        except zlib.error:
            raise BodyError("compressed body is corrupt") from None
        return parts

    def finish(self) -> list[bytes]:
        if self._zlib is None:
            return []
        if not self._zlib.eof:
            raise BodyError("compressed body is truncated")
        return [self._count(self._zlib.flush())]

    def _count(self, piece: bytes) -> bytes:
        self.produced += len(piece)
        if self.produced > self._cap:
            raise BodyError(f"body larger than {self._cap} bytes after decompression")
        return piece


def read_capped(chunks: Iterable[bytes], content_encoding: str, cap: int = MAX_BODY_BYTES) -> bytes:
    """The decoded body from raw ``chunks``; BodyError past ``cap`` bytes (raw or decoded)."""
    inflater = _Inflater(content_encoding, cap)
    raw_bytes = 0
    parts: list[bytes] = []
    for chunk in chunks:
        raw_bytes += len(chunk)
        if raw_bytes > cap:
            raise BodyError(f"body larger than {cap} bytes")
        parts.extend(inflater.feed(chunk))
    parts.extend(inflater.finish())
    return b"".join(parts)


def json_depth_exceeds(data: bytes, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``data`` nests deeper than ``max_depth`` (checked without recursion)."""
    brackets = _STRING.sub(b'""', data).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > max_depth:
                return True
        else:
            depth -= 1
    return False


def _number(text: str, convert: type[int] | type[float]) -> int | float:
    if len(text) > _MAX_NUMBER_CHARS:
        raise BodyError(f"number with {len(text)} characters (at most {_MAX_NUMBER_CHARS})")
    return convert(text)


def _constant(name: str) -> NoReturn:
    raise BodyError(f"{name} is not a JSON number")


def loads_bounded(data: bytes, max_depth: int = MAX_JSON_DEPTH) -> JSONValue:
    """``json.loads`` that cannot recurse past ``max_depth`` or read absurd numbers; BodyError if unsafe."""
    if json_depth_exceeds(data, max_depth):
        raise BodyError(f"JSON nested deeper than {max_depth} levels")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError("body is not UTF-8") from None
    try:
        parsed: JSONValue = json.loads(
            text,
            parse_int=lambda s: _number(s, int),
            parse_float=lambda s: _number(s, float),
            parse_constant=_constant,
        )
        return parsed
    except RecursionError:  # defence in depth: the depth check above should make this unreachable
        raise BodyError(f"JSON nested deeper than {max_depth} levels") from None
    except BodyError:
        raise
    except ValueError:
        raise BodyError("body is not valid JSON (truncated or an error page?)") from None
