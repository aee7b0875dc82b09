"""``greentrain daemon``: a root helper that owns GPU knobs for unprivileged jobs.

Training processes connect to a Unix socket and ask for a power limit or a
clock lock. The daemon checks who they are (socket permissions, SO_PEERCRED),
lets each job change only the GPUs its own process can see
(``visibility.py``), enforces the configured per-GPU limits, gives each GPU to
one connection at a time, journals every change (the same ``KnobController``
the jobs use) and restores a GPU as soon as its client resets, disconnects or
dies — the kernel closes a dead process's socket, which ends its connection
here. Connections are served by one selector loop (``connections.py``) with
caps and an idle timeout; ``status`` shows other users' jobs to admins only.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from greentrain import __version__
from greentrain.actuators.controller import KnobController
from greentrain.actuators.journal import Knob
from greentrain.actuators.lock import DeviceBusyError
from greentrain.daemon.auth import PeerCredentials, authorize, prepare_socket_file
from greentrain.daemon.config import DaemonConfig, GPULimits
from greentrain.daemon.connections import LISTEN_BACKLOG, ConnectionLoop
from greentrain.daemon.protocol import ErrorCode, ProtocolError, error_reply, parse_request
from greentrain.daemon.visibility import GPUIdentity, visible_gpus
from greentrain.device.base import GPU
from greentrain.errors import (
    ConfigError,
    GreentrainError,
    NotSupportedError,
    PrivilegeError,
)
from greentrain.userfile import JSONObject, JSONValue

__all__ = ["DaemonServer", "RequestError"]

log = logging.getLogger(__name__)


class RequestError(Exception):
    """A request the daemon refuses; becomes an error reply."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class _Client:
    conn_id: int
    cred: PeerCredentials
    job: str = ""
    sock: socket.socket | None = None
    visible: set[str] | None = None
    """UUIDs this client's process may change (read at its first GPU request)."""
    visible_reason: str = ""


@dataclass(slots=True)
class _GPUState:
    gpu: GPU
    controller: KnobController
    limits: GPULimits
    owner: int | None = None
    requested_w: float | None = None
    clocks_mhz: tuple[int, int] | None = None
    extra: JSONObject = field(default_factory=dict)


def _translate(e: Exception) -> RequestError:
    if isinstance(e, DeviceBusyError):
        return RequestError(ErrorCode.BUSY, str(e))
    if isinstance(e, ConfigError):
        return RequestError(ErrorCode.OUT_OF_RANGE, str(e))
    if isinstance(e, PrivilegeError):
        return RequestError(ErrorCode.FORBIDDEN, f"{e} (the daemon itself lacks the privilege: run it as root)")
    if isinstance(e, NotSupportedError):
        return RequestError(ErrorCode.NOT_SUPPORTED, str(e))
    return RequestError(ErrorCode.DEVICE_ERROR, str(e))


class DaemonServer:
    """Serves set/reset requests for ``gpus`` on ``config.socket``."""

    def __init__(self, gpus: Sequence[GPU], config: DaemonConfig) -> None:
        self.config = config
        self._gpus = {
            g.uuid: _GPUState(g, KnobController(g, config.state_dir, job="greentrain-daemon"), config.limits_for(g.uuid, g.index))
            for g in gpus
        }
        self._clients: dict[int, _Client] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._loop: ConnectionLoop[_Client] | None = None
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.cap_w: float | None = None
        """Node-policy power cap in force (None: grid clean or no policy)."""
        self.node_status: JSONObject = {}

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        """Restore leftovers, bind the socket, serve in a background thread."""
        for state in self._gpus.values():
            try:
                restored = state.controller.acquire()
                if restored:
                    log.warning("GPU %s: restored %d setting(s) left by an earlier run", state.gpu.uuid, restored)
            except GreentrainError as e:
                log.error("GPU %s: %s", state.gpu.uuid, e)
        self._listener = self._bind()
        config = self.config
        self._loop = ConnectionLoop(
            self._listener, admit=self._admit, on_line=self.handle, on_close=self.disconnect, holding=self._holding,
            max_connections=config.max_connections, max_per_uid=config.max_connections_per_uid,
            idle_timeout_s=config.idle_timeout_s,
        )
        self._thread = threading.Thread(target=self._loop.serve_forever, args=(0.1,), name="greentrain-daemon",
                                        daemon=True)
        self._thread.start()
        log.info("greentrain daemon serving %d GPU(s) on %s", len(self._gpus), self.config.socket)

    @property
    def loop(self) -> ConnectionLoop[_Client] | None:
        """The connection loop (counters of served and refused connections)."""
        return self._loop

    def _bind(self) -> socket.socket:
        path = self.config.socket
        try:
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"daemon.socket {path}: cannot create its directory ({e.strerror})") from None
        if path.exists() or path.is_symlink():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(path))
                raise ConfigError(f"daemon.socket {path}: another greentrain daemon is already listening")
            except (ConnectionRefusedError, FileNotFoundError):
                path.unlink(missing_ok=True)  # stale socket of a dead daemon
            finally:
                probe.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # no window in which the socket is open to others
        try:
            listener.bind(str(path))
            listener.listen(LISTEN_BACKLOG)
        except OSError as e:
            listener.close()
            raise ConfigError(f"daemon.socket {path}: cannot bind ({e.strerror})") from None
        finally:
            os.umask(old_umask)
        prepare_socket_file(self.config)
        return listener

    def shutdown(self) -> None:
        """Stop serving, drop all clients, restore every GPU, remove the socket."""
        with self._lock:
            self._closed, self.cap_w = True, None  # late disconnects and policy ticks change nothing now
        if self._loop is not None:
            self._loop.shutdown_clients()
            self._loop.stop()
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._loop = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            for state in self._gpus.values():
                for message in state.controller.restore():
                    log.error("%s", message)
                state.controller.release()
                state.owner, state.requested_w, state.clocks_mhz = None, None, None
        self.config.socket.unlink(missing_ok=True)

    # -- connections -----------------------------------------------------------------
    def _admit(self, cred: PeerCredentials, sock: socket.socket) -> tuple[_Client | None, str | None]:
        reason = authorize(cred, self.config)
        if reason is not None:
            log.warning("refused connection from pid %d uid %d: %s", cred.pid, cred.uid, reason)
            return None, reason
        return self.connect(cred, sock), None

    def _holding(self, client: _Client | None) -> bool:
        """Whether ``client`` holds a GPU setting (such connections are never closed as idle)."""
        if client is None:
            return False
        with self._lock:
            return any(s.owner == client.conn_id for s in self._gpus.values())

    @property
    def serving(self) -> bool:
        """Whether the event-loop thread is alive (a malformed request must never stop it)."""
        return self._thread is not None and self._thread.is_alive()

    def is_admin(self, client: _Client) -> bool:
        """Admins (``daemon.admin_uids``) see every job in ``status``."""
        return client.cred.uid in self.config.admin_uids

    def connect(self, cred: PeerCredentials, sock: socket.socket | None = None) -> _Client:
        with self._lock:
            client = _Client(next(self._ids), cred, sock=sock)
            self._clients[client.conn_id] = client
            return client

    def disconnect(self, client: _Client) -> None:
        """The client went away (closed, crashed, killed): restore what it held."""
        with self._lock:
            self._clients.pop(client.conn_id, None)
            if self._closed:
                return
            owned = [s for s in self._gpus.values() if s.owner == client.conn_id]
            for state in owned:
                self._release(state, None)
            if owned:
                log.info("client pid %d (%s) disconnected: restored %d GPU(s)", client.cred.pid, client.job, len(owned))

    def handle(self, client: _Client, line: bytes) -> JSONObject:
        """Answer one request line (never raises)."""
        try:
            request = parse_request(line)
        except ProtocolError as e:
            return error_reply(ErrorCode.BAD_REQUEST, str(e))
        try:
            with self._lock:
                if self._closed:
                    return error_reply(ErrorCode.DEVICE_ERROR, "greentrain daemon is shutting down")
                return getattr(self, f"_op_{request.op}")(client, **request.fields)
        except RequestError as e:
            return error_reply(e.code, str(e))
        except (GreentrainError, OSError) as e:
            return error_reply(_translate(e).code, str(e))
        except Exception as e:  # noqa: BLE001 - a bug answers one request with an error, never kills a thread
            log.error("request %s failed: %s", request.op, type(e).__name__)
            return error_reply(ErrorCode.DEVICE_ERROR, f"internal error ({type(e).__name__})")

    # -- operations -----------------------------------------------------------------------
    def _op_hello(self, client: _Client, job: str) -> JSONObject:
        client.job = job
        uuids: list[JSONValue] = [*sorted(self._gpus)]
        return {"ok": True, "daemon": __version__, "uid": client.cred.uid, "gpus": uuids}

    def _op_status(self, client: _Client) -> JSONObject:
        gpus: list[JSONValue] = []
        for state in self._gpus.values():
            owner = self._clients.get(state.owner) if state.owner else None
            shown = owner if owner is not None and self._may_see(client, owner) else None
            gpus.append({
                "uuid": state.gpu.uuid, "index": state.gpu.index,
                "requested_power_limit_w": state.requested_w, "sm_clocks_mhz": [*state.clocks_mhz] if state.clocks_mhz else None,
                "held": owner is not None,
                "owner_pid": shown.cred.pid if shown is not None else None,
                "owner_job": shown.job if shown is not None else None,
                "journaled": state.controller.pending(),
            })
        return {"ok": True, "gpus": gpus, "cap_w": self.cap_w, "node_policy": dict(self.node_status),
                "admin": self.is_admin(client)}

    def _may_see(self, client: _Client, owner: _Client) -> bool:
        """Another job's pid and name are shown to admins and to the same user only."""
        return self.is_admin(client) or owner.cred.uid == client.cred.uid

    def _check_visible(self, client: _Client, state: _GPUState) -> None:
        """Refuse a GPU the client's own process was not given (CUDA_VISIBLE_DEVICES, cgroup, allow-list)."""
        if client.visible is None:
            identities = [GPUIdentity(s.gpu.uuid, s.gpu.index) for s in self._gpus.values()]
            client.visible, client.visible_reason = visible_gpus(
                client.cred.pid, client.cred.uid, identities, self.config.gpu_access)
        if state.gpu.uuid not in client.visible:
            raise RequestError(
                ErrorCode.FORBIDDEN,
                f"GPU {state.gpu.uuid} (index {state.gpu.index}) is not one of this job's GPUs "
                f"({client.visible_reason})",
            )

    def _state_for(self, client: _Client, uuid: str) -> _GPUState:
        state = self._gpus.get(uuid)
        if state is None:
            raise RequestError(ErrorCode.NOT_FOUND, f"no GPU {uuid!r} managed by this daemon")
        self._check_visible(client, state)
        if state.owner not in (None, client.conn_id):
            holder = self._clients.get(state.owner)
            shown = holder is not None and self._may_see(client, holder)
            who = "another job"
            if shown and holder is not None:
                who = f"pid {holder.cred.pid} ({holder.job or 'unnamed job'})"
            raise RequestError(ErrorCode.BUSY, f"GPU {uuid} is held by {who}; two jobs must not share one GPU's knobs")
        return state

    def _op_set_power_limit(self, client: _Client, uuid: str, power_limit_w: float) -> JSONObject:
        state = self._state_for(client, uuid)
        c = state.gpu.power_limit_constraints()
        low = max(c.min_w, state.limits.min_power_limit_w or c.min_w)
        high = min(c.max_w, state.limits.max_power_limit_w or c.max_w)
        if not low <= power_limit_w <= high:
            raise RequestError(
                ErrorCode.OUT_OF_RANGE,
                f"power_limit_w={power_limit_w:g} for GPU {uuid} outside the allowed [{low:g}, {high:g}] W "
                "(GPU constraints and daemon config)",
            )
        effective = min(power_limit_w, self.cap_w) if self.cap_w is not None else power_limit_w
        try:
            state.controller.set_power_limit_w(max(effective, c.min_w))
        except GreentrainError as e:
            raise _translate(e) from None
        state.owner, state.requested_w = client.conn_id, float(power_limit_w)
        return {"ok": True, "power_limit_w": max(effective, c.min_w), "capped": effective < power_limit_w}

    def _op_lock_sm_clocks(self, client: _Client, uuid: str, min_mhz: int, max_mhz: int) -> JSONObject:
        state = self._state_for(client, uuid)
        if not state.limits.allow_clock_lock:
            raise RequestError(ErrorCode.FORBIDDEN, f"GPU {uuid}: clock locking is disabled in the daemon config")
        floor = state.limits.min_sm_clock_mhz
        if floor is not None and min_mhz < floor:
            raise RequestError(ErrorCode.OUT_OF_RANGE, f"min_mhz={min_mhz} below the configured minimum {floor} MHz")
        try:
            state.controller.lock_sm_clocks_mhz(min_mhz, max_mhz)
        except GreentrainError as e:
            raise _translate(e) from None
        state.owner, state.clocks_mhz = client.conn_id, (min_mhz, max_mhz)
        return {"ok": True, "sm_clocks_mhz": [min_mhz, max_mhz]}

    def _op_reset(self, client: _Client, uuid: str | None = None, knob: str | None = None) -> JSONObject:
        if knob is not None and knob not in Knob.ALL:
            raise RequestError(ErrorCode.BAD_REQUEST, f"reset: unknown knob {knob!r}; valid: {', '.join(Knob.ALL)}")
        targets = [self._state_for(client, uuid)] if uuid is not None else list(self._gpus.values())
        errors: list[str] = []
        reset = 0
        for state in targets:
            if state.owner == client.conn_id:
                errors.extend(self._release(state, knob))
                reset += 1
        if errors:
            raise RequestError(ErrorCode.DEVICE_ERROR, "; ".join(errors))
        return {"ok": True, "reset": reset}

    def _release(self, state: _GPUState, knob: str | None) -> list[str]:
        """Give a GPU back: restore its knob(s), re-apply the node cap, clear ownership when nothing is held."""
        errors = state.controller.restore(knob)
        if knob in (None, Knob.POWER_LIMIT):
            state.requested_w = None
            errors.extend(self._apply_cap(state))
        if knob in (None, Knob.SM_CLOCKS):
            state.clocks_mhz = None
        if state.requested_w is None and state.clocks_mhz is None:
            state.owner = None
        return errors

    # -- node policy ------------------------------------------------------------------------
    def set_node_cap(self, cap_w: float | None, status: JSONObject | None = None) -> None:
        """Cap (or uncap) every GPU's power limit; clients keep any lower limit they asked for."""
        with self._lock:
            if self._closed:
                return
            if status is not None:
                self.node_status = status
            if cap_w == self.cap_w:
                return
            self.cap_w = cap_w
            log.info("node policy: power cap %s", f"{cap_w:g} W" if cap_w is not None else "lifted")
            for state in self._gpus.values():
                for message in self._apply_cap(state):
                    log.error("%s", message)

    def _apply_cap(self, state: _GPUState) -> list[str]:
        c = state.gpu.power_limit_constraints()
        wanted = state.requested_w
        if self.cap_w is not None:
            wanted = min(wanted, self.cap_w) if wanted is not None else self.cap_w
        try:
            if wanted is None:
                return state.controller.restore(Knob.POWER_LIMIT)
            state.controller.set_power_limit_w(min(max(wanted, c.min_w), c.max_w))
        except (GreentrainError, OSError) as e:
            return [f"GPU {state.gpu.uuid}: node cap not applied: {e}"]
        return []

