"""Wire protocol of ``greentrain daemon``: one JSON object per line, each way.

Requests carry ``op`` and its fields; replies are ``{"ok": true, ...}`` or
``{"ok": false, "code": <ErrorCode>, "error": <message>}``. Every request is
validated here against a schema before the server acts on it or formats any
of it into a message: bounded nesting (checked before parsing, so the parser
cannot recurse away), exact types, numbers finite and in range, strings
printable (a newline in a job name cannot forge a log line). A malformed or
hostile line costs one error reply and nothing else.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum

from greentrain.userfile import JSONObject

__all__ = ["MAX_LINE_BYTES", "ErrorCode", "ProtocolError", "Request", "parse_request", "encode", "error_reply"]

MAX_LINE_BYTES = 4096
"""Longest accepted request line; longer ones are refused and the connection closed."""


class ErrorCode(StrEnum):
    """Why a request failed (stable strings clients may branch on)."""

    BAD_REQUEST = "bad_request"
    FORBIDDEN = "forbidden"
    OUT_OF_RANGE = "out_of_range"
    NOT_FOUND = "not_found"
    BUSY = "busy"
    NOT_SUPPORTED = "not_supported"
    DEVICE_ERROR = "device_error"
    RETRY_LATER = "retry_later"
    """Too many connections right now (in total or for this uid): connect again after a backoff."""


class ProtocolError(ValueError):
    """A request that does not follow the protocol."""

    code = ErrorCode.BAD_REQUEST


MAX_DEPTH = 4
"""Requests are flat objects; anything nested deeper is refused before it is parsed."""
_RANGES: dict[str, tuple[float, float]] = {
    "power_limit_w": (1.0, 10_000.0),  # no GPU draws 10 kW; keeps every later format and comparison finite
    "min_mhz": (1, 100_000),
    "max_mhz": (1, 100_000),
}

_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "hello": {"job": str},
    "status": {},
    "set_power_limit": {"uuid": str, "power_limit_w": (int, float)},
    "lock_sm_clocks": {"uuid": str, "min_mhz": int, "max_mhz": int},
    "reset": {},
}
_OPTIONAL: dict[str, dict[str, type | tuple[type, ...]]] = {
    "reset": {"uuid": str, "knob": str},
}


@dataclass(frozen=True, slots=True)
class Request:
    """A validated request."""

    op: str
    fields: JSONObject


def parse_request(line: bytes) -> Request:
    """Decode and validate one request line; ProtocolError naming the problem otherwise."""
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(f"request longer than {MAX_LINE_BYTES} bytes")
    raw = _decode(line)
    if not isinstance(raw, dict):
        raise ProtocolError("request must be a JSON object")
    op = raw.pop("op", None)
    if not isinstance(op, str) or op not in _FIELDS:
        shown = repr(op) if op is None or isinstance(op, str) else f"of type {type(op).__name__}"
        raise ProtocolError(f"unknown op {_printable(shown)}; valid: {', '.join(sorted(_FIELDS))}")
    required, optional = _FIELDS[op], _OPTIONAL.get(op, {})
    unknown = set(raw) - set(required) - set(optional)
    if unknown:
        raise ProtocolError(f"{op}: unknown field(s) {_printable(str(sorted(unknown))[:200])}")
    for name in required:
        if name not in raw:
            raise ProtocolError(f"{op}: missing field {name!r}")
    for name, value in raw.items():
        kind = required.get(name) or optional[name]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ProtocolError(f"{op}: field {name!r} has the wrong type ({type(value).__name__})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ProtocolError(f"{op}: field {name!r} must be finite")
        if name in _RANGES and isinstance(value, int | float):  # the ranged fields are all numbers
            low, high = _RANGES[name]
            if not low <= value <= high:  # compared, never formatted: a 400-digit int is just out of range
                raise ProtocolError(f"{op}: field {name!r} must be in [{low:g}, {high:g}]")
            if isinstance(value, int) and isinstance(low, float):
                raw[name] = float(value)
        if isinstance(value, str):
            if not (0 < len(value) <= 128):
                raise ProtocolError(f"{op}: field {name!r} must be 1..128 characters")
            if not value.isprintable():
                raise ProtocolError(f"{op}: field {name!r} contains control characters")
    return Request(op, raw)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def _refuse_constant(name: str) -> float:
    raise ProtocolError(f"numbers must be finite, got {name}")


def _bounded_int(text: str) -> int:
    if len(text) > 12:
        raise ProtocolError(f"number with {len(text)} digits is out of range")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > 40:
        raise ProtocolError(f"number with {len(text)} characters is out of range")
    return float(text)


def _decode(line: bytes) -> object:
    """JSON of one line, refusing deep nesting before parsing and absurd numbers while parsing."""
    depth = 0
    in_string = escaped = False
    for byte in line:  # at most MAX_LINE_BYTES: a plain scan is cheap
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > MAX_DEPTH:
                raise ProtocolError(f"request nested deeper than {MAX_DEPTH} levels")
        elif byte in (0x5D, 0x7D):
            depth -= 1
    try:
        return json.loads(line.decode("utf-8"), parse_int=_bounded_int, parse_float=_bounded_float,
                          parse_constant=_refuse_constant)
    except ProtocolError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError("request is not one line of UTF-8 JSON") from None


def encode(message: JSONObject) -> bytes:
    """One protocol line."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


def error_reply(code: ErrorCode, message: str) -> JSONObject:
    """The reply for a failed request."""
    return {"ok": False, "code": str(code), "error": message}
