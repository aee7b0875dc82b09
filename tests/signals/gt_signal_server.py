"""A local HTTP server (127.0.0.1, ephemeral port) that serves recorded API bodies.

Tests point a provider's ``api_base`` at it, so the real httpx client code is
what runs. Each route answers with a status, a body, headers and an optional
delay; a route may also be a list (answers served in turn, the last repeated)
or a callable ``(request) -> Reply``. Every request is recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

__all__ = ["Reply", "Request", "SignalServer", "recorded"]

API_RESPONSES = Path(__file__).resolve().parents[1] / "data" / "api-responses"


def recorded(name: str) -> bytes:
    """The bytes of a recorded body in tests/data/api-responses."""
    return (API_RESPONSES / name).read_bytes()


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Request:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


Route = Reply | list[Reply] | Callable[[Request], Reply]


class SignalServer:
    """Start with ``with SignalServer() as server:``; ``server.url`` is the api_base."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                parts = urlsplit(self.path)
                request = Request(parts.path, parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()})
                reply = outer._reply(request)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def route(self, path: str, reply: Route) -> None:
        self.routes[path] = reply

    def _reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            route = self.routes.get(request.path)
            if route is None:
                return Reply(404, b'{"error": "not found"}')
            if callable(route):
                return route(request)
            if isinstance(route, list):
                return route.pop(0) if len(route) > 1 else route[0]
            return route

    def hits(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def __enter__(self) -> SignalServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
