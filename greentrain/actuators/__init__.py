"""Safe actuation: journaled, locked, reversible GPU knob changes and their restore on every exit path.

``ActuatorSet`` is the entry point for the engine; ``AdvisoryActuators`` stands in its
place in advisory mode; ``limits`` checks a value against a GPU; ``KnobController`` does the
journaled change for one GPU (also used by ``greentrain daemon``);
(The file-backed fake GPU for tests lives in ``greentrain.testing``.)
"""

from greentrain.actuators.actuator_set import (
    PRIVILEGE_FIX,
    ActuatorSet,
    PrecisionTarget,
)
from greentrain.actuators.controller import KnobController
from greentrain.actuators.limits import validate_power_limit, validate_sm_clocks
from greentrain.actuators.exithooks import ExitHooks
from greentrain.actuators.journal import Journal, JournalEntry, Knob, default_state_dir
from greentrain.actuators.lock import DeviceBusyError, DeviceLock

__all__ = [
    "ActuatorSet",
    "PrecisionTarget",
    "PRIVILEGE_FIX",
    "KnobController",
    "validate_power_limit",
    "validate_sm_clocks",
    "ExitHooks",
    "Journal",
    "JournalEntry",
    "Knob",
    "default_state_dir",
    "DeviceBusyError",
    "DeviceLock",
]
