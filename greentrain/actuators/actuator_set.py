"""Apply a policy's ``Decision`` to a job's GPUs safely; restore on every exit path.

``ActuatorSet`` is what the engine calls at a step boundary. Each change goes
through a journaled, locked ``KnobController``; a change this process may not
make goes to the GPU as the privileged route wraps it (``greentrain daemon``,
a GPU backend: ``greentrain.daemon.gpu``) when a socket is configured;
otherwise it is refused with the exact fix, logged once, counted in
``refused_total``, and the job goes on measuring. Nothing here raises into
the training step.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from greentrain.actuators.controller import KnobController
from greentrain.actuators.exithooks import ExitHooks
from greentrain.actuators.journal import default_state_dir
from greentrain.actuators.lock import DeviceBusyError
from greentrain.device.base import GPU, PrivilegedRoute
from greentrain.device.discovery import privileged_route
from greentrain.errors import (
    ActuationError,
    DaemonUnavailableError,
    DeviceLostError,
    GreentrainError,
    PrivilegeError,
)

if TYPE_CHECKING:  # duck-typed at run time, so the daemon and light tools need not import the policy package
    from greentrain.policies.base import Decision

__all__ = ["ActuatorSet", "PrecisionTarget", "PRIVILEGE_FIX"]

log = logging.getLogger(__name__)

PRIVILEGE_FIX = (
    "fix: run `sudo greentrain daemon` and pass its socket (daemon_socket=/run/greentrain/daemon.sock, "
    "or GREENTRAIN_DAEMON_SOCKET), or run training with the privilege (root / CAP_SYS_ADMIN); "
    "the job goes on measuring at current settings"
)


class PrecisionTarget(Protocol):
    """What ``ActuatorSet`` needs from a precision controller."""

    current: str
    """The precision in use."""

    def request(self, precision: str) -> bool: ...


class _Unjournaled:
    """A change through a routed GPU (``PrivilegedRoute.wrap``): the helper behind the route journals
    and restores it, so this process journals nothing. Same calls as ``KnobController``."""

    def __init__(self, gpu: GPU) -> None:
        self.gpu = gpu

    def set_power_limit_w(self, power_limit_w: float) -> bool:
        self.gpu.set_power_limit_w(power_limit_w)
        return True

    def lock_sm_clocks_mhz(self, min_mhz: int, max_mhz: int) -> bool:
        self.gpu.lock_sm_clocks_mhz(int(min_mhz), int(max_mhz))
        return True


class _Route:
    """How one GPU's knobs are reached."""

    DIRECT = "direct"
    DAEMON = "daemon"
    UNPRIVILEGED = "unprivileged"
    BUSY = "busy"


class ActuatorSet:
    """Journaled power-limit / clock / precision actions for one job's GPUs.

    Use as a context manager (or call ``close``): settings are restored on
    normal exit, exception, SIGINT, SIGTERM, SIGHUP and ``atexit``;
    ``recover()`` restores what a SIGKILLed predecessor left behind. A signal
    is only recorded by the handler; the restore runs at a safe point: when
    the change in progress completes, at the next step boundary
    (``at_step_boundary``, which the engine calls), or from the exit hooks.
    """

    def __init__(
        self,
        gpus: Sequence[GPU],
        *,
        state_dir: str | Path | None = None,
        daemon_socket: str | Path | None = None,
        job: str = "greentrain",
        precision: PrecisionTarget | None = None,
        install_hooks: bool = True,
    ) -> None:
        self.gpus = list(gpus)
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.daemon_socket = Path(daemon_socket) if daemon_socket else None
        self.job = job or "greentrain"
        self.precision = precision
        self.refused_total: Counter[str] = Counter()
        self._controllers = {g.uuid: KnobController(g, self.state_dir, job=str(self.job)) for g in self.gpus}
        self._routes = {g.uuid: _Route.DIRECT for g in self.gpus}
        self._restore_errors: list[str] = []
        self._logged: set[tuple[str, str]] = set()
        self._route: PrivilegedRoute | None = None
        self._targets: dict[str, KnobController | _Unjournaled] = dict(self._controllers)
        """What a change to each GPU goes through: its journaled controller, or the routed GPU."""
        self._lock = threading.RLock()
        self._signal_restored = False
        self._hooks = ExitHooks(self.restore_all)
        if install_hooks:
            self._hooks.install()

    # -- start ---------------------------------------------------------------
    def recover(self) -> int:
        """Take each GPU's lock and restore settings left by dead processes; returns how many."""
        restored = 0
        with self._lock, self._hooks.critical():
            for gpu in self.gpus:
                try:
                    restored += self._controllers[gpu.uuid].acquire()
                except DeviceBusyError as e:
                    self._routes[gpu.uuid] = _Route.BUSY
                    self._refuse("lock", gpu, e)
                except GreentrainError as e:
                    self._refuse("recover", gpu, e)
        return restored

    # -- step boundary -------------------------------------------------------
    def apply(self, decision: Decision) -> list[str]:
        """Apply the knobs ``decision`` sets; returns names of actions applied (never raises an error).

        After an exit signal (SIGINT/SIGTERM/SIGHUP) settings are restored, here at the latest once the
        change in progress completes, and further hardware changes are held: the job is stopping. A signal
        that arrived during the change takes effect as this returns (your handler runs, or
        ``KeyboardInterrupt`` / ``SystemExit`` is raised, as without greentrain).
        """
        applied: list[str] = []
        with self._lock, self._hooks.critical():
            if self._hooks.requested is None:
                if decision.power_limit_w is not None:
                    if self._for_each_gpu("power_limit", decision.power_limit_w):
                        applied.append("power_limit")
                if decision.sm_clocks_mhz is not None:
                    if self._for_each_gpu("sm_clocks", decision.sm_clocks_mhz):
                        applied.append("sm_clocks")
            elif decision.power_limit_w is not None or decision.sm_clocks_mhz is not None:
                self._log_once("signal", "-", "an exit signal was received: GPU settings are restored and "
                                              "further power/clock changes held until the job ends")
            if decision.precision is not None and self._apply_precision(decision.precision):
                applied.append("precision")
            if self._restore_if_requested():  # a signal arrived during this change: the safe point is now
                applied = [name for name in applied if name == "precision"]  # the hardware ones were undone
        return applied

    def at_step_boundary(self) -> None:
        """The engine's safe point: restore now if an exit signal arrived (failures are logged, not raised)."""
        with self._lock, self._hooks.critical():
            self._restore_if_requested()

    @property
    def stop_requested(self) -> bool:
        """Whether an exit signal (SIGINT/SIGTERM/SIGHUP) reached this process's hooks."""
        return self._hooks.requested is not None

    def _restore_if_requested(self) -> bool:
        # Call with the lock held and inside a critical section; True if it restored now.
        if self._hooks.requested is None or self._signal_restored:
            return False
        self._signal_restored = True
        log.info("signal %d received: restoring GPU settings at a safe point", self._hooks.requested)
        self.restore_all()
        return True

    def _for_each_gpu(self, action: str, value: float | tuple[int, int]) -> bool:
        changed = False
        for gpu in self.gpus:
            route = self._routes[gpu.uuid]
            if route in (_Route.BUSY, _Route.UNPRIVILEGED):
                self.refused_total[action] += 1
                continue
            try:
                changed |= self._change(self._targets[gpu.uuid], action, value)
            except PrivilegeError as e:
                changed |= self._on_privilege_error(action, gpu, value, e)
            except DeviceBusyError as e:
                self._routes[gpu.uuid] = _Route.BUSY
                self._refuse(action, gpu, e)
            except DeviceLostError as e:
                self._refuse(action, gpu, e, "the GPU stopped answering; its journal keeps the old value")
            except (GreentrainError, OSError) as e:
                self._refuse(action, gpu, e)
        return changed

    @staticmethod
    def _change(target: KnobController | _Unjournaled, action: str, value: float | tuple[int, int]) -> bool:
        if isinstance(value, tuple):  # action 'sm_clocks': (low, high) MHz
            low, high = value
            return target.lock_sm_clocks_mhz(low, high)
        return target.set_power_limit_w(float(value))  # action 'power_limit'

    def _on_privilege_error(self, action: str, gpu: GPU, value: float | tuple[int, int],
                            error: PrivilegeError) -> bool:
        if self.daemon_socket is None:
            self._routes[gpu.uuid] = _Route.UNPRIVILEGED
            self._refuse(action, gpu, error, PRIVILEGE_FIX)
            return False
        self._routes[gpu.uuid] = _Route.DAEMON
        log.info("GPU %s: no privilege here, using greentrain daemon at %s", gpu.uuid, self.daemon_socket)
        try:
            if self._route is None:
                self._route = privileged_route(self.daemon_socket, job=str(self.job))
            self._targets[gpu.uuid] = _Unjournaled(self._route.wrap(gpu))
            return self._change(self._targets[gpu.uuid], action, value)
        except DeviceBusyError as e:  # another job holds this GPU at the daemon; it may let go later
            self._refuse(action, gpu, e)
            return False
        except DaemonUnavailableError as e:  # busy or restarting daemon: keep the route, try at the next decision
            self._refuse(action, gpu, e)
            return False
        except (PrivilegeError, ActuationError) as e:  # not allowed to connect: stop trying
            self._routes[gpu.uuid] = _Route.UNPRIVILEGED
            self._refuse(action, gpu, e, f"greentrain daemon at {self.daemon_socket} refused or is down; {PRIVILEGE_FIX}")
            return False
        except GreentrainError as e:  # this request only (e.g. above the daemon's configured limit)
            self._refuse(action, gpu, e)
            return False

    def _apply_precision(self, precision: str) -> bool:
        if self.precision is None:
            self.refused_total["precision"] += 1
            self._log_once("precision", "-", f"precision {precision!r} requested but no PrecisionController attached")
            return False
        try:
            return bool(self.precision.request(precision))
        except GreentrainError as e:
            self.refused_total["precision"] += 1
            self._log_once("precision", "-", f"precision {precision!r} refused: {e}")
            return False

    def _refuse(self, action: str, gpu: GPU, error: Exception, fix: str = "") -> None:
        self.refused_total[action] += 1
        message = f"{action} on GPU {gpu.uuid} refused: {error}" + (f"; {fix}" if fix else "")
        self._log_once(action, gpu.uuid, message)

    def _log_once(self, action: str, uuid: str, message: str) -> None:
        if (action, uuid) not in self._logged:
            self._logged.add((action, uuid))
            log.warning("%s", message)

    # -- exit ----------------------------------------------------------------
    def restore_all(self) -> list[str]:
        """Restore every journaled knob and every daemon-held setting; returns failures (also logged)."""
        with self._lock, self._hooks.critical():
            errors: list[str] = []
            for controller in self._controllers.values():
                if controller.lock.held:
                    errors.extend(controller.restore())
            if self._route is not None:
                try:
                    self._route.reset()
                except GreentrainError as e:  # the daemon also resets when our connection closes
                    errors.append(f"greentrain daemon reset failed: {e}")
            for message in errors:
                log.error("%s", message)
            self._restore_errors = errors
            return errors

    def unrestored_count(self) -> int:
        """Knobs this process changed that are not back to their previous values."""
        with self._lock:
            return sum(c.pending() for c in self._controllers.values() if c.lock.held)

    def close(self) -> None:
        """Restore, release the device locks, drop the daemon connection, remove the hooks."""
        with self._lock, self._hooks.critical():
            self.restore_all()
            for controller in self._controllers.values():
                controller.release()  # what failed to restore stays journaled for the next holder
            if self._route is not None:
                self._route.close()
                self._route = None
            self._hooks.uninstall()

    def __enter__(self) -> ActuatorSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
