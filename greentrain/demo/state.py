"""What a demo output folder remembers between runs: the scenario, the step count and the simulated time.

A second ``greentrain demo --out SAME_DIR`` reads ``demo.json`` and resumes
the same job: the same trace, deadline and steps, and a replay clock that
starts where the first run stopped (not where it started), so the carbon
trace continues rather than replaying the morning again.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from greentrain.errors import ConfigError
from greentrain.userfile import load_json

if TYPE_CHECKING:
    from greentrain.job.options import DeadlinePolicy

__all__ = ["STATE_FILE", "DemoState", "load_demo_state", "save_demo_state"]

STATE_FILE = "demo.json"
_VERSION = 1


@dataclass(slots=True, kw_only=True)
class DemoState:
    """The persisted demo job."""

    zone: str
    trace: str
    start: str
    """Simulated submit time (ISO, UTC)."""
    deadline: str
    """Simulated deadline (ISO, UTC)."""
    work_h: float
    speedup: float
    policy: str
    steps_total: int
    step_time_real_s: float
    """Measured real seconds per step when the job was sized."""
    sim_now: str
    """Simulated time when the last run stopped (the next run's replay origin)."""
    reserve_h: float = 0.0
    """Simulated hours the policy keeps free before the deadline (``demo_policy``)."""
    finished: bool = False
    runs: int = 0
    """How many times the demo has been started on this folder."""
    began: bool = False
    """A step has run: a later start resumes (a start that failed before its first step did not begin)."""
    deadline_policy: DeadlinePolicy = "strict"
    """'strict': exit with status 3 after a late finish; 'best-effort': report it, exit 0."""
    step_time_measured_real_s: float | None = None
    """Real seconds per step as the job last measured them (informational)."""
    step_job_s: float | None = None
    """Simulated seconds of work each training step stands for, fixed when the job was sized (None: a folder
    from before; then the sizing's real step time × the speed-up)."""

    def time(self, name: str) -> datetime:
        """One of the ISO fields as an aware datetime."""
        return datetime.fromisoformat({"start": self.start, "deadline": self.deadline, "sim_now": self.sim_now}[name])


def load_demo_state(out_dir: Path) -> DemoState | None:
    """The folder's state, None for a new folder; ConfigError naming the file if it is damaged."""
    path = out_dir / STATE_FILE
    if not path.exists():
        return None
    fix = "use another --out or delete the folder"
    try:
        data = load_json(path, what="demo state")
    except ConfigError as e:  # "<path>:L:C: demo state is not valid JSON (...)"
        raise ConfigError(f"{path}: not a greentrain demo state ({str(e).partition(': ')[2]}); {fix}") from None
    try:
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.pop("version", None) != _VERSION:
            raise ValueError("unknown version")
        fields: dict[str, Any] = data  # the file's values as written: a wrong name fails here, not a type
        state = DemoState(**fields)
        for name in ("start", "deadline", "sim_now"):
            if state.time(name).tzinfo is None:
                raise ValueError(f"{name} has no timezone")
    except (OSError, ValueError, TypeError) as e:
        raise ConfigError(f"{path}: not a greentrain demo state ({e}); {fix}") from None
    return state


def save_demo_state(out_dir: Path, state: DemoState) -> None:
    """Write atomically (a Ctrl-C mid-write must not leave half a file)."""
    path = out_dir / STATE_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"version": _VERSION, **asdict(state)}, indent=2), encoding="utf-8")
    os.replace(tmp, path)
