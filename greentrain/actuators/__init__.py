"""Safe actuation: journaled, locked, reversible GPU knob changes and their restore on every exit path.

``ActuatorSet`` is the entry point for the engine; ``KnobController`` does the
journaled change for one GPU (also used by ``greentrain daemon``);
``FileBackedGPU`` is a test double whose settings survive a killed process.
"""

from greentrain.actuators.actuator_set import (
    PRIVILEGE_FIX,
    ActuatorSet,
    PrecisionTarget,
)
from greentrain.actuators.controller import (
    KnobController,
    validate_power_limit,
    validate_sm_clocks,
)
from greentrain.actuators.exithooks import ExitHooks
from greentrain.actuators.fake import FileBackedGPU
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
    "FileBackedGPU",
    "Journal",
    "JournalEntry",
    "Knob",
    "default_state_dir",
    "DeviceBusyError",
    "DeviceLock",
]
