"""Client side of ``greentrain daemon``, used by the daemon-routed GPU (``greentrain.daemon.gpu``).

The connection stays open for the whole job: the daemon restores this job's
settings when it closes, so a crashed or killed job cannot leak a setting.

Connecting is patient but bounded: ``connect()`` runs on a blocking socket
whose kernel wait is capped by ``SO_SNDTIMEO`` (a Python timeout set before
``connect`` would make a full listen backlog fail at once with EAGAIN), and
EAGAIN, ECONNREFUSED, a missing socket (daemon restarting) or a
``retry_later`` refusal (connection caps) are retried with exponential
backoff within ``connect_budget_s``. The read timeout is set only once
connected. A connection the daemon closed while it held nothing (idle
timeout) is reopened transparently.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import BinaryIO

from greentrain.actuators.lock import DeviceBusyError
from greentrain.daemon.protocol import ErrorCode, encode
from greentrain.errors import (
    ActuationError,
    ConfigError,
    DaemonUnavailableError,
    DeviceError,
    NotSupportedError,
    PrivilegeError,
)
from greentrain.userfile import JSONObject

__all__ = ["DaemonClient", "DaemonUnavailableError", "DEFAULT_SOCKET_ENV"]

DEFAULT_SOCKET_ENV = "GREENTRAIN_DAEMON_SOCKET"

_ERRORS: dict[str, type[Exception]] = {
    ErrorCode.BAD_REQUEST: ConfigError,
    ErrorCode.OUT_OF_RANGE: ConfigError,
    ErrorCode.FORBIDDEN: PrivilegeError,
    ErrorCode.NOT_FOUND: DeviceError,
    ErrorCode.BUSY: DeviceBusyError,
    ErrorCode.NOT_SUPPORTED: NotSupportedError,
    ErrorCode.DEVICE_ERROR: DeviceError,
}
_TRANSIENT_CONNECT = (BlockingIOError, ConnectionRefusedError, FileNotFoundError, InterruptedError, TimeoutError)


class _Retry(Exception):
    """The daemon asked us to come back later, or closed an idle connection: reconnect and resend."""


class DaemonClient:
    """One persistent connection to the daemon; methods raise greentrain errors on refusal."""

    def __init__(
        self,
        socket_path: str | Path | None = None,
        *,
        job: str = "",
        timeout_s: float = 10.0,
        connect_budget_s: float = 3.0,
    ) -> None:
        """``timeout_s``: wait for one reply; ``connect_budget_s``: retries of a busy or absent daemon."""
        path = socket_path or os.environ.get(DEFAULT_SOCKET_ENV) or "/run/greentrain/daemon.sock"
        self.socket_path = Path(path)
        self.job = "".join(c for c in job if c.isprintable())  # the daemon refuses control characters
        self._timeout_s = timeout_s
        self._connect_budget_s = connect_budget_s
        self._sock: socket.socket | None = None
        self._reader: BinaryIO | None = None
        self._lock = threading.Lock()
        self._holding = False
        self.reconnects = 0
        """Connections opened again after a busy daemon or an idle close (a test and benchmark counter)."""

    def _open(self, deadline: float) -> socket.socket:
        """A connected socket, retrying transient failures with backoff until ``deadline``."""
        delay_s = 0.005
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # Blocking connect whose kernel wait for backlog room is bounded; no Python timeout yet.
            wait_s = max(0.01, min(1.0, deadline - time.monotonic()))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                            struct.pack("ll", int(wait_s), int((wait_s % 1) * 1_000_000)))
            try:
                sock.connect(str(self.socket_path))
            except PermissionError:
                sock.close()
                raise PrivilegeError(
                    f"greentrain daemon socket {self.socket_path}: permission denied; fix: add this user to the "
                    "daemon's group (sudo usermod -aG greentrain $USER) and log in again"
                ) from None
            except _TRANSIENT_CONNECT as e:
                sock.close()
                if time.monotonic() + delay_s > deadline:
                    raise DaemonUnavailableError(
                        f"greentrain daemon socket {self.socket_path}: {e.strerror or e} (retried for "
                        f"{self._connect_budget_s:g} s); start it with `sudo greentrain daemon`"
                    ) from None
                time.sleep(delay_s)
                delay_s = min(delay_s * 2, 0.25)
                continue
            except OSError as e:
                sock.close()
                raise DaemonUnavailableError(
                    f"greentrain daemon socket {self.socket_path}: {e.strerror or e}; "
                    "start it with `sudo greentrain daemon`"
                ) from None
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 0))
            sock.settimeout(self._timeout_s)  # only now that the connection exists
            return sock

    def request(self, message: JSONObject) -> JSONObject:
        """Send one request, return the reply; raise the matching greentrain error on ``ok: false``."""
        with self._lock:
            deadline = time.monotonic() + self._connect_budget_s
            delay_s = 0.005
            while True:
                fresh = self._sock is None
                try:
                    if fresh:
                        sock = self._open(deadline)
                        self._sock, self._reader = sock, sock.makefile("rb")
                        if self.job:
                            self._call_connected({"op": "hello", "job": self.job[:128]}, fresh=True)
                    reply = self._call_connected(message, fresh=fresh)
                except _Retry as e:
                    self._drop()
                    if self._holding or time.monotonic() + delay_s > deadline:
                        self._holding = False  # the daemon restored whatever this connection held
                        raise DaemonUnavailableError(f"greentrain daemon at {self.socket_path}: {e}") from None
                    self.reconnects += 1
                    time.sleep(delay_s)
                    delay_s = min(delay_s * 2, 0.25)
                    continue
                if message.get("op") in ("set_power_limit", "lock_sm_clocks"):
                    self._holding = True
                elif message.get("op") == "reset" and "uuid" not in message and "knob" not in message:
                    self._holding = False
                return reply

    def _call_connected(self, message: JSONObject, fresh: bool = False) -> JSONObject:
        assert self._sock is not None
        try:
            self._sock.sendall(encode(message))
        except OSError as e:
            line = self._pending_line()  # the daemon may have said why it hung up (e.g. forbidden)
            if not line:
                self._drop()
                if not fresh:
                    raise _Retry(f"connection lost ({e})") from None
                raise DaemonUnavailableError(
                    f"greentrain daemon at {self.socket_path}: connection lost ({e})"
                ) from None
        else:
            line = self._pending_line(raise_errors=True)
        if not line:
            self._drop()
            if not fresh:
                raise _Retry("the daemon closed the connection (idle timeout?)")
            raise DaemonUnavailableError(f"greentrain daemon at {self.socket_path} closed the connection")
        try:
            reply = json.loads(line)
        except ValueError:
            self._drop()
            raise DaemonUnavailableError(f"greentrain daemon at {self.socket_path}: unreadable reply") from None
        if not reply.get("ok"):
            if reply.get("code") == ErrorCode.RETRY_LATER:
                raise _Retry(str(reply.get("error", "busy")))
            error = _ERRORS.get(reply.get("code"), ActuationError)
            raise error(f"greentrain daemon: {reply.get('error', 'refused')}")
        return reply

    def _pending_line(self, raise_errors: bool = False) -> bytes:
        if self._reader is None:  # dropped: nothing more will arrive
            return b""
        try:
            return self._reader.readline()
        except OSError as e:
            if not raise_errors:
                return b""
            self._drop()
            raise DaemonUnavailableError(f"greentrain daemon at {self.socket_path}: connection lost ({e})") from None

    def hello(self) -> JSONObject:
        return self.request({"op": "hello", "job": self.job[:128] or "greentrain"})

    def status(self) -> JSONObject:
        return self.request({"op": "status"})

    def set_power_limit_w(self, uuid: str, power_limit_w: float) -> JSONObject:
        return self.request({"op": "set_power_limit", "uuid": uuid, "power_limit_w": float(power_limit_w)})

    def lock_sm_clocks_mhz(self, uuid: str, min_mhz: int, max_mhz: int) -> JSONObject:
        return self.request({"op": "lock_sm_clocks", "uuid": uuid, "min_mhz": int(min_mhz), "max_mhz": int(max_mhz)})

    def reset(self, uuid: str | None = None, knob: str | None = None) -> JSONObject:
        """Restore this connection's settings (all, one GPU, or one knob). No-op when never connected."""
        if self._sock is None:
            return {"ok": True, "reset": 0}
        message: JSONObject = {"op": "reset"}
        if uuid is not None:
            message["uuid"] = uuid
        if knob is not None:
            message["knob"] = knob
        return self.request(message)

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                if self._reader is not None:
                    self._reader.close()
                self._sock.close()
            finally:
                self._sock, self._reader = None, None

    def close(self) -> None:
        """Close the connection (the daemon restores whatever is still held)."""
        with self._lock:
            self._drop()

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
