"""Hostile daemon request lines, shared by the daemon fuzz tests and benchmarks/reliability.py."""

from __future__ import annotations

import json
import random

__all__ = ["VALID", "HOSTILE_LINES", "mutations"]

VALID = [
    {"op": "hello", "job": "train"},
    {"op": "status"},
    {"op": "set_power_limit", "uuid": "GPU-x", "power_limit_w": 200},
    {"op": "lock_sm_clocks", "uuid": "GPU-x", "min_mhz": 900, "max_mhz": 1200},
    {"op": "reset", "knob": "power_limit_w"},
]
HOSTILE_LINES = [
    b'{"op":["status"]}',
    b'{"op":{"x":1}}',
    b'{"op":1e999}',
    b'{"op":"status","x":' + b"[" * 1500 + b"]" * 1500 + b"}",
    b"[" * 3000,
    b'{"op":"set_power_limit","uuid":"GPU-0","power_limit_w":' + b"9" * 400 + b"}",
    b'{"op":"set_power_limit","uuid":"GPU-0","power_limit_w":-' + b"9" * 400 + b".5}",
    b'{"op":"set_power_limit","uuid":"GPU-0","power_limit_w":Infinity}',
    b'{"op":"set_power_limit","uuid":"GPU-0","power_limit_w":1e308}',
    b'{"op":"lock_sm_clocks","uuid":"GPU-0","min_mhz":' + b"1" * 300 + b',"max_mhz":2}',
    b'{"op":"hello","job":"evil\\ngreentrain-daemon WARNING forged line"}',
    b'{"op":"hello","job":"bell\\u0007"}',
    b'{"op":"set_power_limit","uuid":"GPU-0\\u0000","power_limit_w":200}',
    b'{"op":"hello","job":"' + b"a" * 200 + b'"}',
    b'{"op":"status"' + b"," * 50 + b"}",
    b"\xff\xfe\xfd",
    b"null",
    b'"status"',
]


def mutations(count: int, seed: int = 17) -> list[bytes]:
    """Valid requests with one field replaced by a random hostile value (seeded: reproducible)."""
    rng = random.Random(seed)
    values = [None, True, [], {}, "", "\u202e", -1, 0, 10**30, 1.5, "x" * 129, [[[[[1]]]]], {"a": {"b": {"c": {}}}},
              "GPU-0\r\n", float("1e300"), -0.0]
    lines = []
    for _ in range(count):
        request = dict(rng.choice(VALID))
        key = rng.choice(sorted(request) + ["extra"])
        request[key] = rng.choice(values)
        lines.append(json.dumps(request).encode())
    return lines
