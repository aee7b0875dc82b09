"""Advisory mode: decide every power-limit, clock and precision change, apply none of them.

Shared clusters and trial runs want to see what greentrain *would* do before
letting it act. ``AdvisoryActuators`` stands where an ``ActuatorSet`` stands:
the engine hands it every decision, it checks each knob against the GPU's
constraints with read-only calls, records the advice and returns "nothing
applied". It owns no journal, no device lock and no exit hooks, and it never
calls a setter, so there is nothing to restore.

The mode is on with ``Session(actuation="advise")``, ``--advise-only`` on the
commands that could actuate, or ``GREENTRAIN_ADVISE_ONLY=1`` (which wins over
an explicit "apply": it is the operator's switch for a shared node).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol

from greentrain.actuators.limits import validate_power_limit, validate_sm_clocks
from greentrain.device.base import GPU
from greentrain.errors import ActuationError, ConfigError, GreentrainError

if TYPE_CHECKING:
    from greentrain.policies.base import Decision

__all__ = ["ADVISE_ENV", "Actuation", "AdvisoryActuators", "AdvisoryModeError", "advise_only_from_env",
           "refuse_in_advisory_mode", "refuse_write_if_advisory", "resolve_actuation", "without_knobs"]


class PrecisionReading(Protocol):
    """A precision controller as advisory mode sees it: read (its current precision), never switched."""

    current: str

log = logging.getLogger(__name__)

ADVISE_ENV = "GREENTRAIN_ADVISE_ONLY"
Actuation = Literal["apply", "advise"]
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def advise_only_from_env() -> bool:
    """Whether ``$GREENTRAIN_ADVISE_ONLY`` asks for advisory mode; ConfigError for a value that says neither."""
    raw = os.environ.get(ADVISE_ENV, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigError(f"{ADVISE_ENV}={raw!r}: use 1 (advisory mode, no hardware writes) or 0")


def resolve_actuation(actuation: str | None) -> Actuation:
    """'advise' when asked or when the environment says so, else 'apply'."""
    if actuation not in (None, "apply", "advise"):
        raise ConfigError(f"actuation: {actuation!r} is not 'apply' or 'advise'")
    if advise_only_from_env():
        if actuation == "apply":
            log.warning("greentrain: %s=1 overrides actuation='apply': decisions are advised, not applied",
                        ADVISE_ENV)
        return "advise"
    return "advise" if actuation == "advise" else "apply"


def refuse_write_if_advisory(request: str, advise_only_flag: bool = False) -> None:
    """ConfigError (one line, exit 2 in the CLI) when advisory mode is on and ``request`` needs a write."""
    if advise_only_flag or advise_only_from_env():
        source = "--advise-only" if advise_only_flag else f"{ADVISE_ENV}=1"
        raise ConfigError(f"{request}: writes to the GPU, but advisory mode is on ({source}); "
                          "drop one of the two")


class AdvisoryModeError(ActuationError):
    """A hardware change asked for while ``GREENTRAIN_ADVISE_ONLY=1`` (never reaches the device)."""


def refuse_in_advisory_mode(change: str) -> None:
    """Raise ``AdvisoryModeError`` for ``change`` when the environment says advisory mode (the last backstop)."""
    if advise_only_from_env():
        raise AdvisoryModeError(f"{change} not applied: advisory mode is on ({ADVISE_ENV}=1)")


def without_knobs(decision: Decision) -> Decision:
    """The decision a training loop acts on in advisory mode: timing kept, hardware knobs dropped."""
    if decision.power_limit_w is None and decision.sm_clocks_mhz is None and decision.precision is None:
        return decision
    return replace(decision, power_limit_w=None, sm_clocks_mhz=None, precision=None)


class AdvisoryActuators:
    """Drop-in for ``ActuatorSet`` that records advice instead of applying it (never a setter call).

    ``advice`` holds the latest advised value per knob; ``history`` every distinct advice in order.
    """

    advisory = True
    """Marks advisory actuators for the engine (it logs and exports advice rather than applied actions)."""

    def __init__(self, gpus: Sequence[GPU], *, precision: PrecisionReading | None = None,
                 job: str = "greentrain") -> None:
        self.gpus = list(gpus)
        self.precision = precision
        """A ``PrecisionController`` whose current precision is reported (never switched)."""
        self.job = job or "greentrain"
        self.refused_total: Counter[str] = Counter()  # advice is never refused for privilege: stays empty
        self.advice: dict[str, object] = {}
        self.history: list[dict[str, object]] = []
        self.points_source: str | None = None
        """Where the operating points behind power advice came from (``AdvisoryPoints.source``); None: measured."""
        self._lock = threading.Lock()

    # -- the ActuatorSet surface the engine and profiler use ------------------------------------------
    def recover(self) -> int:
        """Nothing to recover: advisory mode neither takes device locks nor reads journals."""
        return 0

    def apply(self, decision: Decision) -> list[str]:
        """Record the knobs ``decision`` sets as advice; nothing is applied, so the result is always []."""
        self.advise(decision)
        return []

    def restore_all(self) -> list[str]:
        return []

    def unrestored_count(self) -> int:
        return 0

    def close(self) -> None:
        """Nothing to restore or release."""

    def __enter__(self) -> AdvisoryActuators:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- advice ---------------------------------------------------------------------------------------
    def advise(self, decision: Decision) -> dict[str, object]:
        """The advice for ``decision``'s knobs with current values read alongside (empty: no knob set)."""
        advice: dict[str, object] = {}
        if decision.power_limit_w is not None:
            advice["power_limit_w"] = float(decision.power_limit_w)
            advice["current_power_limit_w"] = self._read(lambda g: g.power_limit_w())
            advice.update(self._check("power_limit", decision.power_limit_w))
        if decision.sm_clocks_mhz is not None:
            low, high = decision.sm_clocks_mhz
            advice["sm_clocks_mhz"] = [int(low), int(high)]
            advice["current_sm_clock_mhz"] = self._read(lambda g: float(g.sm_clock_mhz()))
            advice.update(self._check("sm_clocks", decision.sm_clocks_mhz))
        if decision.precision is not None:
            advice["precision"] = decision.precision
            advice["current_precision"] = self.precision.current if self.precision is not None else None
        if not advice:
            return advice
        with self._lock:
            self.advice.update({k: v for k, v in advice.items() if not k.startswith(("current_", "invalid_"))})
            if not self.history or self.history[-1] != advice:
                self.history.append(dict(advice))
        return advice

    def _read(self, read: Callable[[GPU], float]) -> float | None:
        """The value on the first GPU that answers (a read, never a write); None without GPUs."""
        for gpu in self.gpus:
            try:
                return float(read(gpu))
            except (GreentrainError, OSError, ValueError):
                continue
        return None

    def _check(self, knob: str, value: float | tuple[int, int]) -> dict[str, str]:
        """Why the advice could not be applied as is on some GPU (constraints read, not written)."""
        problems: list[str] = []
        for gpu in self.gpus:
            try:
                if isinstance(value, tuple):  # sm_clocks: (low, high) MHz
                    validate_sm_clocks(gpu, int(value[0]), int(value[1]))
                else:
                    validate_power_limit(gpu, float(value))
            except (GreentrainError, OSError) as e:
                problems.append(str(e))
        return {f"invalid_{knob}": "; ".join(problems)} if problems else {}
