"""The training script's own state, saved and restored with the Session's checkpoint.

Model and optimizer are not all a loop keeps: an LR scheduler, a GradScaler,
a seeded sampler, the best validation loss, running loss accumulators. Each
object registered with ``Session(..., state={"scheduler": sched, ...})`` rides
in the default checkpoint: one with ``state_dict()``/``load_state_dict()``
(anything torch offers, or your own class) through those methods, a plain
``dict`` of counters by value (restored in place, so the loop's own reference
sees the saved values). They are restored when the checkpoint is loaded,
before the first step.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, MutableMapping
from typing import Any
from typing import Protocol, runtime_checkable

from greentrain.errors import ConfigError

__all__ = ["UserState"]

log = logging.getLogger("greentrain.session")


@runtime_checkable
class _Stateful(Protocol):
    """What a registered object saves and loads with (torch modules, optimizers, schedulers, samplers)."""

    def state_dict(self) -> object: ...

    def load_state_dict(self, state: object) -> object: ...


def _stateful(obj: object) -> bool:
    return isinstance(obj, _Stateful)


class UserState:
    """Objects registered by name, saved as one ``{name: state}`` dict (see the module docstring)."""

    def __init__(self, objects: Mapping[str, object] | None = None) -> None:
        if objects is not None and not isinstance(objects, Mapping):
            raise ConfigError(f"state: give a dict of name -> object, got {type(objects).__name__}")
        self.objects: dict[str, Any] = {}
        for name, obj in (objects or {}).items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"state: names must be non-empty strings, got {name!r}")
            if not (_stateful(obj) or isinstance(obj, MutableMapping)):
                raise ConfigError(f"state[{name!r}]: a {type(obj).__name__} has no state_dict()/load_state_dict(); "
                                  "register an object that has them, or a dict")
            self.objects[name] = obj

    def __bool__(self) -> bool:
        return bool(self.objects)

    def state_dict(self) -> dict[str, object]:
        """Each object's state by name (a dict's a deep copy: later changes do not reach the checkpoint)."""
        return {name: obj.state_dict() if _stateful(obj) else copy.deepcopy(dict(obj))
                for name, obj in self.objects.items()}

    def load_state_dict(self, saved: Mapping[str, Any] | None) -> None:
        """Put each saved state back; an object the checkpoint does not hold keeps its value, with one line."""
        saved = saved or {}
        for name, obj in self.objects.items():
            if name not in saved:
                log.warning("greentrain: state[%r]: not in the checkpoint (registered after it was written); "
                            "it starts from its current value", name)
                continue
            if _stateful(obj):
                obj.load_state_dict(saved[name])
            else:
                assert isinstance(obj, MutableMapping)
                obj.clear()
                obj.update(copy.deepcopy(saved[name]))
