"""The actuation journal: what a GPU knob was before we touched it.

Before any hardware change we write the knob's *previous* value to a small
JSON file per device (``<state_dir>/<uuid>.journal.json``), fsync it and only
then change the hardware. Whoever later holds the device lock (the same
process at exit, or the next start after a SIGKILL) restores every entry and
removes it. Writes go to a temporary file that replaces the old one
atomically, so a kill at any instant leaves either the old or the new journal,
never a torn one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from greentrain.errors import ActuationError, ConfigError

__all__ = ["Knob", "JournalEntry", "Journal", "default_state_dir", "safe_device_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class Knob:
    """Names of the knobs we journal (strings, so the file stays readable)."""

    POWER_LIMIT = "power_limit_w"
    SM_CLOCKS = "sm_clocks_mhz"
    ALL = (POWER_LIMIT, SM_CLOCKS)


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One knob's value before the first change: restore target."""

    uuid: str
    knob: str
    previous: float | None
    """Power limit in W, or for clocks ``None`` (= unlocked, the driver default)."""
    pid: int
    time: str
    """ISO-8601 UTC time of the first change."""
    job: str = ""


def default_state_dir() -> Path:
    """``$GREENTRAIN_STATE_DIR``, else /var/lib/greentrain for root, else ~/.local/state/greentrain."""
    env = os.environ.get("GREENTRAIN_STATE_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/greentrain")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "greentrain"


def safe_device_name(uuid: str) -> str:
    """A file-name-safe form of a device UUID."""
    return _UNSAFE.sub("_", uuid) or "_"


def ensure_state_dir(path: Path) -> Path:
    """Create the state directory (mode 0700 for a fresh one); ConfigError if impossible."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"state_dir {path}: cannot create ({e.strerror}); set GREENTRAIN_STATE_DIR") from None
    return path


class Journal:
    """The journal of one device; every method re-reads the file so several objects stay consistent."""

    def __init__(self, state_dir: Path, uuid: str) -> None:
        self.uuid = uuid
        self.path = ensure_state_dir(Path(state_dir)) / f"{safe_device_name(uuid)}.journal.json"

    def entries(self) -> dict[str, JournalEntry]:
        """Knob -> entry. A corrupt file is an ActuationError naming it (never silently dropped)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise ActuationError(f"{self.path}: cannot read journal ({e.strerror})") from None
        try:
            raw = json.loads(text)
            return {knob: JournalEntry(**fields) for knob, fields in raw["entries"].items()}
        except (ValueError, KeyError, TypeError) as e:
            raise ActuationError(
                f"{self.path}: corrupt journal ({e}); restore the GPU by hand "
                f"(nvidia-smi -i {self.uuid} -rgc; nvidia-smi -i {self.uuid} -pl <default>) and delete the file"
            ) from None

    def record(self, knob: str, previous: float | None, *, job: str = "") -> bool:
        """Journal ``previous`` for ``knob`` unless already journaled (the first value wins); True if new."""
        entries = self.entries()
        if knob in entries:
            return False
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        entries[knob] = JournalEntry(self.uuid, knob, previous, os.getpid(), now, job)
        self._write(entries)
        return True

    def remove(self, knob: str) -> None:
        """Forget ``knob`` after it was restored."""
        entries = self.entries()
        if entries.pop(knob, None) is not None:
            self._write(entries)

    def _write(self, entries: dict[str, JournalEntry]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            _fsync_dir(self.path.parent)
            return
        body = json.dumps({"uuid": self.uuid, "entries": {k: asdict(v) for k, v in entries.items()}}, indent=1)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".journal-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(self.path.parent)


def _fsync_dir(path: Path) -> None:
    # The rename is only durable once the directory entry is on disk.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
