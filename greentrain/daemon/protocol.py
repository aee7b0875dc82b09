"""Wire protocol of ``greentrain daemon``: one JSON object per line, each way.

Requests carry ``op`` and its fields; replies are ``{"ok": true, ...}`` or
``{"ok": false, "code": <ErrorCode>, "error": <message>}``. Every request is
validated here, field by field, before the server acts on it, so a malformed
or hostile line costs one error reply and nothing else.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

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


class ProtocolError(ValueError):
    """A request that does not follow the protocol."""

    code = ErrorCode.BAD_REQUEST


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
    fields: dict[str, Any]


def parse_request(line: bytes) -> Request:
    """Decode and validate one request line; ProtocolError naming the problem otherwise."""
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(f"request longer than {MAX_LINE_BYTES} bytes")
    try:
        raw = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("request is not one line of UTF-8 JSON") from None
    if not isinstance(raw, dict):
        raise ProtocolError("request must be a JSON object")
    op = raw.pop("op", None)
    if op not in _FIELDS:
        raise ProtocolError(f"unknown op {op!r}; valid: {', '.join(sorted(_FIELDS))}")
    required, optional = _FIELDS[op], _OPTIONAL.get(op, {})
    unknown = set(raw) - set(required) - set(optional)
    if unknown:
        raise ProtocolError(f"{op}: unknown field(s) {sorted(unknown)}")
    for name in required:
        if name not in raw:
            raise ProtocolError(f"{op}: missing field {name!r}")
    for name, value in raw.items():
        kind = required.get(name) or optional[name]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ProtocolError(f"{op}: field {name!r} has the wrong type ({type(value).__name__})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ProtocolError(f"{op}: field {name!r} must be finite")
        if isinstance(value, str) and not (0 < len(value) <= 128):
            raise ProtocolError(f"{op}: field {name!r} must be 1..128 characters")
    return Request(op, raw)


def encode(message: dict[str, Any]) -> bytes:
    """One protocol line."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


def error_reply(code: ErrorCode, message: str) -> dict[str, Any]:
    """The reply for a failed request."""
    return {"ok": False, "code": str(code), "error": message}
