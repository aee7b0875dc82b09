"""Client side of ``greentrain daemon``, used by ``ActuatorSet`` when it lacks the privilege.

The connection stays open for the whole job: the daemon restores this job's
settings when it closes, so a crashed or killed job cannot leak a setting.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

from greentrain.actuators.lock import DeviceBusyError
from greentrain.daemon.protocol import ErrorCode, encode
from greentrain.errors import (
    ActuationError,
    ConfigError,
    DeviceError,
    NotSupportedError,
    PrivilegeError,
)

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


class DaemonUnavailableError(ActuationError):
    """No daemon answers on the socket."""


class DaemonClient:
    """One persistent connection to the daemon; methods raise greentrain errors on refusal."""

    def __init__(self, socket_path: str | Path | None = None, *, job: str = "", timeout_s: float = 10.0) -> None:
        path = socket_path or os.environ.get(DEFAULT_SOCKET_ENV) or "/run/greentrain/daemon.sock"
        self.socket_path = Path(path)
        self.job = job
        self._timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._reader: Any = None
        self._lock = threading.Lock()

    def _connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self._timeout_s)
        try:
            sock.connect(str(self.socket_path))
        except PermissionError:
            sock.close()
            raise PrivilegeError(
                f"greentrain daemon socket {self.socket_path}: permission denied; "
                "fix: add this user to the daemon's group (sudo usermod -aG greentrain $USER) and log in again"
            ) from None
        except OSError as e:
            sock.close()
            raise DaemonUnavailableError(
                f"greentrain daemon socket {self.socket_path}: {e.strerror or e}; start it with `sudo greentrain daemon`"
            ) from None
        self._sock, self._reader = sock, sock.makefile("rb")
        if self.job:
            self._call_connected({"op": "hello", "job": self.job[:128]})

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request, return the reply; raise the matching greentrain error on ``ok: false``."""
        with self._lock:
            if self._sock is None:
                self._connect()
            return self._call_connected(message)

    def _call_connected(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self._sock is not None
        try:
            self._sock.sendall(encode(message))
        except OSError as e:
            line = self._pending_line()  # the daemon may have said why it hung up (e.g. forbidden)
            if not line:
                self._drop()
                raise DaemonUnavailableError(f"greentrain daemon at {self.socket_path}: connection lost ({e})") from None
        else:
            line = self._pending_line(raise_errors=True)
        if not line:
            self._drop()
            raise DaemonUnavailableError(f"greentrain daemon at {self.socket_path} closed the connection")
        try:
            reply = json.loads(line)
        except ValueError:
            self._drop()
            raise DaemonUnavailableError(f"greentrain daemon at {self.socket_path}: unreadable reply") from None
        if not reply.get("ok"):
            error = _ERRORS.get(reply.get("code"), ActuationError)
            raise error(f"greentrain daemon: {reply.get('error', 'refused')}")
        return reply

    def _pending_line(self, raise_errors: bool = False) -> bytes:
        try:
            return self._reader.readline()
        except OSError as e:
            if not raise_errors:
                return b""
            self._drop()
            raise DaemonUnavailableError(f"greentrain daemon at {self.socket_path}: connection lost ({e})") from None

    def hello(self) -> dict[str, Any]:
        return self.request({"op": "hello", "job": self.job[:128] or "greentrain"})

    def status(self) -> dict[str, Any]:
        return self.request({"op": "status"})

    def set_power_limit_w(self, uuid: str, power_limit_w: float) -> dict[str, Any]:
        return self.request({"op": "set_power_limit", "uuid": uuid, "power_limit_w": float(power_limit_w)})

    def lock_sm_clocks_mhz(self, uuid: str, min_mhz: int, max_mhz: int) -> dict[str, Any]:
        return self.request({"op": "lock_sm_clocks", "uuid": uuid, "min_mhz": int(min_mhz), "max_mhz": int(max_mhz)})

    def reset(self, uuid: str | None = None, knob: str | None = None) -> dict[str, Any]:
        """Restore this connection's settings (all, one GPU, or one knob). No-op when never connected."""
        if self._sock is None:
            return {"ok": True, "reset": 0}
        message: dict[str, Any] = {"op": "reset"}
        if uuid is not None:
            message["uuid"] = uuid
        if knob is not None:
            message["knob"] = knob
        return self.request(message)

    def _drop(self) -> None:
        if self._sock is not None:
            try:
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
