"""Journaled, locked changes to one GPU's knobs (power limit, locked SM clocks).

``KnobController`` is the only code that changes a GPU setting, both inside a
training process and inside ``greentrain daemon``. The order is always:
validate -> take the device lock -> journal the previous value -> change the
hardware. With ``GREENTRAIN_ADVISE_ONLY=1`` every change is refused before any
of that (a backstop for code that builds its own ``ActuatorSet``). Restoring walks the journal and removes each entry once the GPU
has its old value back; an entry whose restore failed stays, so a later start
tries again. So a change or restore stopped at any instruction (an exception,
SIGKILL) leaves either the old value (with or without its entry) or the new
value with its entry, and restoring again finishes the job
(tests/actuators/test_interrupted_change.py checks every opcode).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from greentrain.actuators.advisory import refuse_in_advisory_mode
from greentrain.actuators.journal import Journal, Knob
from greentrain.actuators.limits import validate_power_limit, validate_sm_clocks
from greentrain.actuators.lock import DeviceLock
from greentrain.device.base import GPU
from greentrain.errors import (
    ActuationError,
    ConfigError,
    DeviceError,
    DeviceLostError,
)

__all__ = ["KnobController"]

log = logging.getLogger(__name__)


class KnobController:
    """Owns one GPU's knobs for this process: lock, journal, change, restore."""

    def __init__(self, gpu: GPU, state_dir: Path, *, job: str = "") -> None:
        self.gpu = gpu
        self.job = job
        self.journal = Journal(state_dir, gpu.uuid)
        self.lock = DeviceLock(state_dir, gpu.uuid)

    def acquire(self) -> int:
        """Take the device lock (DeviceBusyError if held) and restore leftovers; returns how many."""
        first = not self.lock.held
        self.lock.acquire()
        if not first:
            return 0
        leftovers = self.journal.entries()
        if leftovers:
            pids = sorted({e.pid for e in leftovers.values()})
            log.warning("GPU %s: restoring %d setting(s) left by dead pid(s) %s", self.gpu.uuid, len(leftovers), pids)
            self.restore()
        return len(leftovers)

    def set_power_limit_w(self, power_limit_w: float) -> bool:
        """Set the limit; False if it already was that value (nothing journaled)."""
        refuse_in_advisory_mode(f"GPU {self.gpu.uuid}: power limit {power_limit_w:g} W")
        value = validate_power_limit(self.gpu, power_limit_w)
        self.acquire()
        current = self.gpu.power_limit_w()
        if abs(current - value) < 0.5 and Knob.POWER_LIMIT not in self.journal.entries():
            return False
        new = self.journal.record(Knob.POWER_LIMIT, current, job=self.job)
        self._change(Knob.POWER_LIMIT, new, lambda: self.gpu.set_power_limit_w(value))
        return True

    def lock_sm_clocks_mhz(self, min_mhz: int, max_mhz: int) -> bool:
        """Lock SM clocks; the journal's previous value is None (unlocked: NVML cannot read a lock)."""
        refuse_in_advisory_mode(f"GPU {self.gpu.uuid}: SM clocks {min_mhz}-{max_mhz} MHz")
        low, high = validate_sm_clocks(self.gpu, min_mhz, max_mhz)
        self.acquire()
        new = self.journal.record(Knob.SM_CLOCKS, None, job=self.job)
        self._change(Knob.SM_CLOCKS, new, lambda: self.gpu.lock_sm_clocks_mhz(low, high))
        return True

    def _change(self, knob: str, newly_journaled: bool, change: Callable[[], object]) -> None:
        try:
            change()
        except DeviceLostError:
            raise  # unknown whether it took effect: keep the entry so a later start restores
        except (DeviceError, ConfigError):
            if newly_journaled:  # the driver refused: nothing changed, keep the journal truthful
                self.journal.remove(knob)
            raise

    def restore(self, knob: str | None = None) -> list[str]:
        """Restore journaled knobs (all, or one); returns error messages for those that failed."""
        errors: list[str] = []
        try:
            entries = self.journal.entries()
        except ActuationError as e:
            return [str(e)]
        for name, entry in entries.items():
            if knob is not None and name != knob:
                continue
            try:
                if name == Knob.POWER_LIMIT:
                    assert entry.previous is not None  # a power limit is journaled with the limit it replaced
                    self.gpu.set_power_limit_w(float(entry.previous))
                elif name == Knob.SM_CLOCKS:
                    self.gpu.reset_sm_clocks()
                else:
                    errors.append(f"GPU {self.gpu.uuid}: unknown knob {name!r} in {self.journal.path}")
                    continue
            except (DeviceError, ConfigError, OSError) as e:
                errors.append(f"GPU {self.gpu.uuid}: could not restore {name} to {entry.previous!r}: {e}")
                continue
            self.journal.remove(name)
        return errors

    def pending(self) -> int:
        """Journaled knobs not yet restored."""
        try:
            return len(self.journal.entries())
        except ActuationError:
            return 1  # a corrupt journal counts as unrestored: a person must look

    def release(self) -> None:
        """Drop the device lock (call after ``restore``)."""
        self.lock.release()
