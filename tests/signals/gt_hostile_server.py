"""A hostile carbon API on 127.0.0.1: every way a server can answer badly, one scenario each.

Each scenario writes raw bytes to the socket (so it can trickle, lie about
lengths or send a gzip bomb) and gets the request (path, query, headers) to
echo credentials back. Bodies have the real shape of each provider's answer,
so parsing code runs on them, with one field made hostile. The server counts
what it sent and whether the client hung up before it finished.
"""

from __future__ import annotations

import gzip
import json
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from urllib.parse import parse_qs, urlsplit

__all__ = ["HostileServer", "Exchange", "SCENARIOS", "PROVIDER_ZONES", "valid_body", "bomb", "echo_credentials"]

PROVIDER_ZONES = {"electricitymaps": "GB", "watttime": "CAISO_NORTH", "ukgrid": "GB"}
NOW_ISO = "2026-11-23T10:00:00Z"


@dataclass
class Exchange:
    """One request as the server saw it, and what it sent back."""

    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    sent_bytes: int = 0
    hung_up_early: bool = False


def valid_body(provider: str, path: str, value: str = "250", when: str = NOW_ISO) -> bytes:
    """A well-formed answer of ``provider`` for ``path`` with ``value`` and ``when`` spliced in raw."""
    if provider == "watttime" and path.endswith("/login"):
        return b'{"token": "wt-bearer-token-0123456789"}'
    if provider == "electricitymaps":
        item = f'{{"zone": "GB", "carbonIntensity": {value}, "datetime": "{when}"}}'
        if path.endswith("/latest"):
            return item.encode()
        key = "forecast" if "forecast" in path else "data" if "past-range" in path else "history"
        return f'{{"zone": "GB", "{key}": [{item}]}}'.encode()
    if provider == "watttime":
        meta = '{"region": "CAISO_NORTH", "units": "lbs_co2_per_mwh", "data_point_period_seconds": 300}'
        return f'{{"meta": {meta}, "data": [{{"point_time": "{when}", "value": {value}}}]}}'.encode()
    period = f'{{"from": "{when}", "to": "{when}", "intensity": {{"forecast": {value}, "actual": {value}}}}}'
    return f'{{"data": [{period}]}}'.encode()


@cache
def bomb(inflated_bytes: int = 32 * 1024 * 1024) -> bytes:
    """gzip of ``inflated_bytes`` of JSON whitespace: ~1000x smaller on the wire than in memory."""
    return gzip.compress(b"[" + b" " * (inflated_bytes - 2) + b"]", compresslevel=9)


Writer = Callable[["_Conn"], None]


@dataclass
class _Conn:
    provider: str
    exchange: Exchange
    wfile: object
    stop: threading.Event

    def send(self, data: bytes) -> None:
        self.wfile.write(data)  # type: ignore[attr-defined]
        self.wfile.flush()  # type: ignore[attr-defined]
        self.exchange.sent_bytes += len(data)

    def respond(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        head = [f"HTTP/1.1 {status} X", "Connection: close"]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if not any(k.lower() == "content-length" for k in headers or {}):
            head.append(f"Content-Length: {len(body)}")
        self.send(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    def valid(self, value: str = "250", when: str = NOW_ISO) -> bytes:
        return valid_body(self.provider, self.exchange.path, value, when)


def _drip(conn: _Conn, data: bytes, every_s: float = 0.05) -> None:
    for i in range(len(data)):
        if conn.stop.wait(every_s):
            return
        conn.send(data[i : i + 1])


NESTED = b"[" * 50_000 + b"]" * 50_000

SCENARIOS: dict[str, Writer] = {
    "nested-json": lambda c: c.respond(200, NESTED),
    "nested-in-valid-shape": lambda c: c.respond(200, c.valid(value=(b"[" * 5000 + b"1" + b"]" * 5000).decode())),
    "nested-error-body": lambda c: c.respond(500, b'{"message": ' + NESTED + b"}"),
    "huge-int": lambda c: c.respond(200, c.valid(value="9" * 400)),
    "huge-float": lambda c: c.respond(200, c.valid(value="1" + "0" * 400 + ".5")),
    "infinite-float": lambda c: c.respond(200, c.valid(value="1e999")),
    "year-0001": lambda c: c.respond(200, c.valid(when="0001-01-01T00:00:00+01:00")),
    "year-9999": lambda c: c.respond(200, c.valid(when="9999-12-31T23:59:00Z")),
    "redirect-302": lambda c: c.respond(302, c.valid(), {"Location": "http://127.0.0.1:9/elsewhere"}),
    "redirect-301-json": lambda c: c.respond(301, c.valid(), {"Location": "/v3/moved"}),
    "gzip-bomb": lambda c: c.respond(200, bomb(), {"Content-Encoding": "gzip"}),
    "corrupt-gzip": lambda c: c.respond(200, b"\x1f\x8b\x08\x00garbage-not-deflate", {"Content-Encoding": "gzip"}),
    "huge-body": lambda c: c.respond(200, b"[" + b"1," * (3 * 1024 * 1024) + b"1]"),
    "lying-length": lambda c: c.respond(200, c.valid(), {"Content-Length": str(10**12)}),
    "unknown-encoding": lambda c: c.respond(200, c.valid(), {"Content-Encoding": "br"}),
    "drip-body": lambda c: (c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 400\r\n\r\n"), _drip(c, b" " * 400)),
    "drip-headers": lambda c: _drip(c, b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 380 + b"\r\n\r\n{}"),
    "drip-error-body": lambda c: (c.send(b"HTTP/1.1 503 X\r\nContent-Length: 400\r\n\r\n"), _drip(c, b" " * 400)),
}
"""Scenario name -> what the server writes. Drips would last 20 s; the client's deadline is far shorter."""


class HostileServer:
    """``with HostileServer(provider, scenario) as server:`` -> ``server.url`` answers every path badly.

    ``login_ok``: WattTime's ``/login`` answers well, so the hostile answer reaches the data paths.
    ``writer``: a custom scenario instead of a named one.
    """

    def __init__(self, provider: str, scenario: str | None = None, *, login_ok: bool = True,
                 writer: Writer | None = None) -> None:
        self.provider = provider
        self.writer = writer or SCENARIOS[scenario or "nested-json"]
        self.login_ok = login_ok
        self.exchanges: list[Exchange] = []
        self._stop = threading.Event()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    request_line = self.rfile.readline(8192).decode("latin-1").split()
                    headers: dict[str, str] = {}
                    while True:
                        line = self.rfile.readline(8192).decode("latin-1").strip()
                        if not line:
                            break
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                except OSError:
                    return
                if len(request_line) < 2:
                    return
                parts = urlsplit(request_line[1])
                exchange = Exchange(parts.path, parse_qs(parts.query), headers)
                outer.exchanges.append(exchange)
                conn = _Conn(outer.provider, exchange, self.wfile, outer._stop)
                try:
                    if outer.login_ok and outer.provider == "watttime" and parts.path.endswith("/login"):
                        conn.respond(200, conn.valid())
                    else:
                        outer.writer(conn)
                except OSError:
                    exchange.hung_up_early = True

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


def echo_credentials(status: int) -> Writer:
    """A scenario that reflects every request header and the query string back, in an error body
    (``status`` >= 300) or spliced into the data fields of a 200 answer."""

    def write(conn: _Conn) -> None:
        echoed = json.dumps({"headers": conn.exchange.headers, "query": conn.exchange.query})
        if status >= 300:
            body = json.dumps({"message": f"bad request {echoed}", "error": echoed}).encode()
            conn.respond(status, body, {"Location": "http://127.0.0.1:9/?" + echoed[:200]} if status < 400 else {})
            return
        auth = conn.exchange.headers.get("authorization", "") + conn.exchange.headers.get("auth-token", "")
        when = (auth + " " + NOW_ISO).replace('"', "'")
        conn.respond(200, conn.valid(when=when))

    return write

