"""The daemon's connection loop: one thread, a selector, caps and an idle timeout.

Every client is a non-blocking socket in one ``selectors`` loop, so a flood
of idle connections costs file descriptors, not threads. The loop enforces a
cap on connections in total and per uid (a refused client gets one error
line), closes connections that stay silent past the idle timeout while they
hold nothing, cuts lines at ``MAX_LINE_BYTES``, and drops clients that never
read their replies. Requests are answered in arrival order by ``on_line``,
which must not raise (its exceptions are turned into error replies anyway).
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

C = TypeVar("C")
"""The server's own record of a client (opaque to the loop)."""

from greentrain.daemon.auth import PeerCredentials, peer_credentials
from greentrain.daemon.protocol import MAX_LINE_BYTES, ErrorCode, encode, error_reply
from greentrain.userfile import JSONObject

__all__ = ["ConnectionLoop", "Connection", "LISTEN_BACKLOG"]

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 512
"""Pending connects the kernel queues for us (the loop accepts them as fast as it can)."""
_MAX_PENDING_REPLY_BYTES = 256 * 1024


@dataclass(eq=False)
class Connection(Generic[C]):
    """One client socket and its buffers."""

    sock: socket.socket
    cred: PeerCredentials
    client: C
    inbox: bytearray = field(default_factory=bytearray)
    outbox: bytearray = field(default_factory=bytearray)
    last_active_s: float = 0.0
    closing: bool = False


class ConnectionLoop(Generic[C]):
    """Accepts on ``listener`` and serves lines until ``stop()``.

    ``admit(cred) -> (client, None)`` or ``(None, reason)``; ``on_line(client, line) -> reply dict``;
    ``on_close(client)``; ``holding(client) -> bool`` exempts a connection from the idle timeout.
    """

    def __init__(
        self,
        listener: socket.socket,
        *,
        admit: Callable[[PeerCredentials, socket.socket], tuple[C | None, str | None]],
        on_line: Callable[[C, bytes], JSONObject],
        on_close: Callable[[C], None],
        holding: Callable[[C], bool],
        max_connections: int,
        max_per_uid: int,
        idle_timeout_s: float,
    ) -> None:
        self._listener = listener
        self._admit, self._on_line, self._on_close, self._holding = admit, on_line, on_close, holding
        self.max_connections, self.max_per_uid, self.idle_timeout_s = max_connections, max_per_uid, idle_timeout_s
        self._selector = selectors.DefaultSelector()
        self._conns: dict[int, Connection[C]] = {}
        self._per_uid: Counter[int] = Counter()
        self._stop = threading.Event()
        self._next_sweep_s = 0.0
        self.refused: Counter[str] = Counter()
        """Connections refused, by reason ('total', 'per_uid', 'auth', 'idle', 'slow_reader', 'oversized')."""
        self.served = 0
        """Connections admitted since start."""

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def serve_forever(self, poll_s: float = 0.1) -> None:
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        try:
            while not self._stop.is_set():
                for key, events in self._selector.select(timeout=poll_s):
                    if key.data is None:
                        self._accept()
                    else:
                        self._service(key.data, events)
                self._sweep_idle()
        finally:
            for conn in list(self._conns.values()):
                self._close(conn, notify=False)
            self._selector.close()

    def stop(self) -> None:
        self._stop.set()

    def shutdown_clients(self) -> None:
        """Hang up on every client (from any thread); the loop notices and cleans up."""
        for conn in list(self._conns.values()):
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- accept ------------------------------------------------------------------------------
    def _accept(self) -> None:
        for _ in range(256):  # a burst at a time, then serve the others
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # EMFILE and friends: keep serving who we have
                log.error("accept failed: %s", e)
                return
            try:
                cred = peer_credentials(sock)
            except OSError:
                sock.close()
                continue
            self._admit_one(sock, cred)

    def _admit_one(self, sock: socket.socket, cred: PeerCredentials) -> None:
        if len(self._conns) >= self.max_connections:
            self._refuse(sock, "total", f"too many connections ({self.max_connections}); retry later")
            return
        if self._per_uid[cred.uid] >= self.max_per_uid:
            self._refuse(sock, "per_uid", f"uid {cred.uid} holds {self.max_per_uid} connections already; retry later")
            return
        client, reason = self._admit(cred, sock)
        if client is None:  # admit gives (None, reason) exactly when it refuses
            self._refuse(sock, "auth", reason or "not authorized")
            return
        sock.setblocking(False)
        conn = Connection(sock, cred, client, last_active_s=time.monotonic())
        self._conns[sock.fileno()] = conn
        self._per_uid[cred.uid] += 1
        self.served += 1
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _refuse(self, sock: socket.socket, kind: str, reason: str) -> None:
        self.refused[kind] += 1
        code = ErrorCode.FORBIDDEN if kind == "auth" else ErrorCode.RETRY_LATER
        try:
            sock.setblocking(False)
            sock.send(encode(error_reply(code, reason)))
        except OSError:
            pass
        sock.close()

    # -- per connection -------------------------------------------------------------------------
    def _service(self, conn: Connection[C], events: int) -> None:
        if events & selectors.EVENT_READ and not conn.closing:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._close(conn)
                return
            if data:
                conn.last_active_s = time.monotonic()
                conn.inbox += data
                self._answer_lines(conn)
        self._flush(conn)

    def _answer_lines(self, conn: Connection[C]) -> None:
        while True:
            end = conn.inbox.find(b"\n")
            if end < 0:
                if len(conn.inbox) > MAX_LINE_BYTES:
                    self._refuse_line(conn)
                return
            line = bytes(conn.inbox[: end + 1])
            del conn.inbox[: end + 1]
            if len(line) > MAX_LINE_BYTES + 1:
                self._refuse_line(conn)
                return
            if not line.strip():
                continue
            try:
                reply = self._on_line(conn.client, line)
            except Exception as e:  # noqa: BLE001 - a request must never take the loop down
                log.error("request handler failed: %s", type(e).__name__)
                reply = error_reply(ErrorCode.DEVICE_ERROR, f"internal error ({type(e).__name__})")
            conn.outbox += encode(reply)

    def _refuse_line(self, conn: Connection[C]) -> None:
        self.refused["oversized"] += 1
        conn.inbox.clear()
        conn.outbox += encode(error_reply(ErrorCode.BAD_REQUEST, f"request longer than {MAX_LINE_BYTES} bytes"))
        conn.closing = True  # say why, then hang up

    def _flush(self, conn: Connection[C]) -> None:
        if conn.outbox:
            try:
                sent = conn.sock.send(conn.outbox)
                del conn.outbox[:sent]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._close(conn)
                return
        if len(conn.outbox) > _MAX_PENDING_REPLY_BYTES:  # it sends but never reads
            self.refused["slow_reader"] += 1
            self._close(conn)
            return
        if conn.closing and not conn.outbox:
            self._close(conn)
            return
        wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbox else 0)
        try:
            self._selector.modify(conn.sock, wanted, conn)
        except (KeyError, ValueError):
            pass

    def _sweep_idle(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep_s:  # once a second is plenty for a timeout counted in minutes
            return
        self._next_sweep_s = now + min(1.0, self.idle_timeout_s / 4)
        cutoff = now - self.idle_timeout_s
        for conn in list(self._conns.values()):
            if conn.last_active_s < cutoff and not self._holding(conn.client):
                self.refused["idle"] += 1
                self._close(conn)

    def _close(self, conn: Connection[C], notify: bool = True) -> None:
        fd = conn.sock.fileno()
        if self._conns.pop(fd, None) is None:
            return
        self._per_uid[conn.cred.uid] -= 1
        if self._per_uid[conn.cred.uid] <= 0:
            del self._per_uid[conn.cred.uid]
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        if notify:
            try:
                self._on_close(conn.client)
            except Exception as e:  # noqa: BLE001 - one client's cleanup must not stop the loop
                log.error("closing a connection failed: %s", e)
