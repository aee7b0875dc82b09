"""The one bounded HTTP client all live providers share (httpx), with every fault made a ``SignalError``.

Bounds, because a carbon API is a stranger on the internet:

- one total deadline per provider call (``timeout_s``), covering connect, every
  read and every request inside the call (a WattTime re-login included). A
  socket watchdog shuts the connection down at the deadline, so a server that
  trickles one byte at a time cannot hold a call longer than that;
- a body cap while streaming and after decompression (``body.MAX_BODY_BYTES``);
- 2xx only: a redirect is an error, never followed and never parsed as data;
- JSON parsed with bounded depth and bounded number length.

Every message names the provider and path and passes through the client's
``Redactor`` before it leaves: secrets are masked in every encoding, first,
and only then is the text shortened.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Any, TypeAlias

import httpx

from greentrain.errors import AuthError, ConfigError, RateLimitedError, SignalError
from greentrain.signals.transport.body import MAX_BODY_BYTES, BodyError, loads_bounded, read_capped
from greentrain.signals.transport.redact import Redactor
from greentrain.userfile import JSONValue

__all__ = ["JSONClient", "QueryParams", "QueryValue", "retry_after_s", "ERROR_BODY_BYTES"]

QueryValue: TypeAlias = "str | int | float | bool | None"
"""One query parameter's value."""
QueryParams: TypeAlias = Mapping[str, QueryValue]
"""Query parameters of a GET: one scalar per name."""

_USER_AGENT = "greentrain (carbon-aware training; https://github.com/greentrain)"
ERROR_BODY_BYTES = 64 * 1024
"""Most of an error body read for its message (the rest is not worth the wait)."""
_DETAIL_CHARS = 200
_CHUNK_BYTES = 16 * 1024


def retry_after_s(value: str | None, now_s: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent/invalid."""
    if not value:
        return None
    text = value.strip()[:64]
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is not None:
        return max(0.0, seconds) if seconds == seconds and seconds != float("inf") else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    try:
        return max(0.0, when.timestamp() - (time.time() if now_s is None else now_s))
    except (OverflowError, OSError, ValueError):
        return None


def _one_line(text: str) -> str:
    """``text`` with control characters (newlines included) turned into spaces: one log or error line."""
    return "".join(c if c.isprintable() else " " for c in text)


class _Watchdog:
    """Shuts the sockets of one call down when its deadline passes, waking any blocked read."""

    def __init__(self, seconds: float) -> None:
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.fired = False
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        """httpcore trace hook: remember each socket as soon as it is connected (TLS included)."""
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed

    def cancel(self) -> None:
        self._timer.cancel()


class _CallDeadline(threading.local):
    """Per thread: when the provider call in progress must end (None: no call in progress)."""

    deadline: float | None = None


class JSONClient:
    """GET JSON from ``api_base`` within a total deadline; raise typed, redacted SignalErrors."""

    def __init__(
        self,
        provider: str,
        api_base: str,
        *,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        """``timeout_s`` is the total deadline of one provider call (see ``call``)."""
        if not api_base.startswith(("http://", "https://")):
            raise ConfigError(f"api_base: {api_base!r} must start with http:// or https://")
        if not timeout_s > 0:
            raise ConfigError(f"timeout_s: must be > 0, got {timeout_s!r}")
        self.provider = provider
        self.api_base = api_base.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.max_body_bytes = max_body_bytes
        self.redactor = Redactor()
        """Secrets to mask in every message; providers add theirs (``redactor.add``)."""
        self._local = _CallDeadline()
        self._client = httpx.Client(
            headers={"User-Agent": _USER_AGENT, "Accept": "application/json", "Accept-Encoding": "gzip, deflate"},
            transport=transport,
            follow_redirects=False,
            trust_env=True,
            # A fresh connection per request: each one passes through the watchdog's connect hook.
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    @contextmanager
    def call(self, what: str) -> Iterator[None]:
        """One provider call: every request inside shares one deadline of ``timeout_s``, and any
        exception (a parser's OverflowError or TypeError included) leaves as a redacted SignalError."""
        outer = self._local.deadline
        if outer is None:
            self._local.deadline = time.monotonic() + self.timeout_s
        try:
            yield
        except SignalError as e:
            e.args = (self._safe(str(e), 400),)  # keeps the class and retry_after_s
            raise
        except Exception as e:  # noqa: BLE001 - nothing but SignalError may leave a provider
            detail = self._safe(str(e), 120)
            raise SignalError(f"{self.provider} {what}: malformed answer ({type(e).__name__}: {detail})") from None
        finally:
            if outer is None:
                self._local.deadline = None

    def get(
        self,
        path: str,
        *,
        params: QueryParams | None = None,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | tuple[str, str] | None = None,
    ) -> JSONValue:
        """Decoded JSON of GET ``api_base/path``; typed SignalError on any fault."""
        where = f"{self.provider} {path}"
        deadline = self._local.deadline or time.monotonic() + self.timeout_s
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            raise SignalError(f"{where}: deadline of {self.timeout_s:g} s passed before the request")
        watchdog = _Watchdog(remaining_s)
        try:
            request = self._client.build_request(
                "GET", f"{self.api_base}/{path.lstrip('/')}", params=params, headers=headers,
                timeout=httpx.Timeout(remaining_s), extensions={"trace": watchdog.trace},
            )
            response = self._client.send(request, auth=auth, stream=True)
            try:
                return self._read(response, where, deadline)
            finally:
                response.close()
        except SignalError:
            raise
        except BodyError as e:
            raise SignalError(f"{where}: {e}") from None
        except (httpx.HTTPError, httpx.StreamError, OSError) as e:
            if watchdog.fired or time.monotonic() >= deadline:
                raise SignalError(
                    f"{where}: timed out (no complete answer within the {self.timeout_s:g} s deadline)"
                ) from None
            if isinstance(e, httpx.ConnectError):
                raise SignalError(f"{where}: cannot connect ({self._safe(str(e), 120)})") from None
            raise SignalError(f"{where}: request failed ({type(e).__name__})") from None
        finally:
            watchdog.cancel()

    @staticmethod
    def _chunks(response: httpx.Response, deadline: float) -> Iterator[bytes]:
        """The raw body, stopping at the deadline even while bytes keep coming (or inflating)."""
        for chunk in response.iter_raw(_CHUNK_BYTES):
            if time.monotonic() >= deadline:
                raise httpx.ReadTimeout("total deadline passed while reading the body")
            yield chunk

    def _read(self, response: httpx.Response, where: str, deadline: float) -> JSONValue:
        status = response.status_code
        if not 200 <= status < 300:
            self._raise_for_status(response, where, deadline)
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise SignalError(f"{where}: body of {declared} bytes is over the {self.max_body_bytes} byte limit")
        body = read_capped(self._chunks(response, deadline), response.headers.get("Content-Encoding", ""),
                           self.max_body_bytes)
        return loads_bounded(body)

    def _raise_for_status(self, response: httpx.Response, where: str, deadline: float) -> None:
        status = response.status_code
        detail = self._error_text(response, deadline)
        suffix = f": {detail}" if detail else ""
        if 300 <= status < 400:
            raise SignalError(f"{where}: HTTP {status} redirect; redirects are not followed (check api_base){suffix}")
        if status in (401, 403):
            raise AuthError(f"{where}: HTTP {status}, credentials rejected or not authorised{suffix}")
        if status == 429:
            wait_s = retry_after_s(response.headers.get("Retry-After"))
            raise RateLimitedError(f"{where}: HTTP 429 rate limited{suffix}", retry_after_s=wait_s)
        raise SignalError(f"{where}: HTTP {status}{suffix}")

    def _error_text(self, response: httpx.Response, deadline: float) -> str:
        """A short, redacted description from an error body's 'message'/'error'/'detail' field, if any."""
        try:
            body = loads_bounded(read_capped(self._chunks(response, deadline),
                                             response.headers.get("Content-Encoding", ""), ERROR_BODY_BYTES))
        except (BodyError, httpx.HTTPError, httpx.StreamError, OSError):
            return ""
        if isinstance(body, Mapping):
            for key in ("message", "error", "detail"):
                value = body.get(key)
                if isinstance(value, Mapping):
                    value = value.get("message")
                if isinstance(value, str):
                    return self._safe(value, _DETAIL_CHARS)  # masked first, then cut
        return ""

    def _safe(self, text: str, limit: int) -> str:
        return _one_line(self.redactor.redact(text, limit=limit))

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
