"""The forecast archive: every forecast as it was issued, in one embedded SQLite file.

A provider's forecast is worth what it predicted, measured later against what
happened; nobody keeps those past forecasts for us (Electricity Maps and the GB
API serve only the current one), so greentrain records them as they arrive.
One row per (provider, zone, issued_at, target_time) with the value and its
unit (the ``forecast_rows`` view); the tables store the provider and zone once
per series. Values are hourly means in g/kWh (greentrain plans by the hour);
``issued_at`` is when the forecast was fetched (or the provider's own
``generated_at``), so a back-test never uses a forecast before it existed.
Actual values (``actuals``) are kept beside them to measure the skill.

Safe to share: WAL mode, one transaction per fetch, a busy timeout for
concurrent writers, so a crash or a second recorder never corrupts the file.
``max_bytes`` caps the file: the oldest forecasts are pruned first.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from greentrain.errors import ConfigError

__all__ = [
    "ArchiveCorruptError",
    "ArchiveError",
    "ArchiveLockedError",
    "ForecastArchive",
    "Series",
    "UNIT",
    "is_sqlite_file",
]

UNIT = "g_per_kwh"
"""The unit greentrain records (providers convert theirs, e.g. WattTime's lbs/MWh)."""
_SCHEMA_VERSION = "1"
_BUSY_TIMEOUT_S = 5.0
_PRUNE_TO = 0.8
"""After pruning, the file holds at most this fraction of ``max_bytes`` (room before the next prune)."""
_SIZE_CHECK_EVERY = 16
"""Writes between two size checks (a check is two PRAGMAs; pruning is rare)."""
_MAGIC = b"SQLite format 3\x00"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY, provider TEXT NOT NULL, zone TEXT NOT NULL, unit TEXT NOT NULL,
    UNIQUE (provider, zone));
CREATE TABLE IF NOT EXISTS forecasts (
    series INTEGER NOT NULL REFERENCES series(id), issued_at INTEGER NOT NULL,
    target_time INTEGER NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (series, issued_at, target_time)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS actuals (
    series INTEGER NOT NULL REFERENCES series(id), target_time INTEGER NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (series, target_time)) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS forecast_rows AS
    SELECT s.provider, s.zone, f.issued_at, f.target_time, f.value, s.unit
    FROM forecasts AS f JOIN series AS s ON s.id = f.series;
"""


class ArchiveError(ConfigError):
    """The archive file cannot be used (not an archive, corrupt, unreadable); the message names it."""


class ArchiveCorruptError(ArchiveError):
    """SQLite cannot read the file (not a database, or a damaged one): a recorder sets it aside."""


class ArchiveLockedError(ArchiveError):
    """Another process held the archive's write lock longer than the busy timeout."""


@dataclass(frozen=True, slots=True)
class Series:
    """One provider's forecasts for one zone, and how many rows the archive holds."""

    provider: str
    zone: str
    unit: str
    forecast_rows: int
    actual_rows: int
    first_issued_s: int | None
    last_issued_s: int | None


def is_sqlite_file(path: Path) -> bool:
    """Whether ``path`` starts with the SQLite header (else it may be the CSV long format)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(_MAGIC)) == _MAGIC
    except OSError:
        return False


class ForecastArchive:
    """An open archive file. Thread-safe; every write is one transaction."""

    def __init__(self, path: str | Path, *, max_bytes: int | None = None, create: bool = True,
                 busy_timeout_s: float = _BUSY_TIMEOUT_S) -> None:
        """Open (and with ``create`` make) the archive at ``path``; ArchiveError if it is not one.

        ``max_bytes``: prune the oldest forecasts when the file grows past it (None: no cap).
        """
        self.path = Path(path).expanduser()
        if max_bytes is not None and max_bytes < 1 << 20:
            raise ConfigError(f"max_bytes: an archive cap under 1 MiB is too small, got {max_bytes}")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._writes = 0
        self.pruned_rows = 0
        if not create and not self.path.is_file():
            raise ArchiveError(f"{self.path}: no such forecast archive")
        if self.path.exists() and not self.path.is_file():
            raise ArchiveError(f"{self.path}: not a regular file")
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None,
                                       check_same_thread=False)
        except (OSError, sqlite3.Error) as e:
            raise ArchiveError(f"{self.path}: cannot open the forecast archive ({e})") from None
        try:
            self._prepare(create)
        except BaseException:
            self._db.close()
            raise

    def _prepare(self, create: bool) -> None:
        with self._errors("open"):
            # auto_vacuum must precede the first table; it lets pruning give pages back to the disk.
            self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            if self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                raise ArchiveError(f"{self.path}: cannot use write-ahead logging here (a network file system?)")
            self._db.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a crash loses at most the last write
            self._db.execute("PRAGMA journal_size_limit = 4194304")
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables and not create:
                raise ArchiveError(f"{self.path}: empty file, not a forecast archive")
            if tables and "forecasts" not in tables:
                raise ArchiveError(f"{self.path}: an SQLite file, but not a greentrain forecast archive")
            if "forecasts" not in tables:
                with self._transaction():
                    self._create_schema()
            version = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if version is None or version[0] != _SCHEMA_VERSION:
                found = "none" if version is None else version[0]
                raise ArchiveError(f"{self.path}: archive schema {found}, this greentrain reads {_SCHEMA_VERSION}")

    def _create_schema(self) -> None:
        for statement in filter(str.strip, _SCHEMA.split(";")):
            self._db.execute(statement)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (_SCHEMA_VERSION,))

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """sqlite3 errors as ArchiveError naming the file; a lock timeout as ArchiveLockedError."""
        try:
            yield
        except sqlite3.OperationalError as e:
            text = str(e)
            if "locked" in text or "busy" in text:
                raise ArchiveLockedError(f"{self.path}: {what}: locked by another process ({text})") from None
            raise ArchiveError(f"{self.path}: {what}: {text}") from None
        except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed"
            raise ArchiveCorruptError(f"{self.path}: {what}: not a usable forecast archive ({e})") from None

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE (takes the write lock at once, waiting up to the busy timeout) ... COMMIT."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _series_id(self, provider: str, zone: str, unit: str) -> int:
        row = self._db.execute("SELECT id, unit FROM series WHERE provider = ? AND zone = ?",
                               (provider, zone)).fetchone()
        if row is None:
            row_id = self._db.execute("INSERT INTO series (provider, zone, unit) VALUES (?, ?, ?)",
                                      (provider, zone, unit)).lastrowid
            assert row_id is not None  # an INSERT sets it
            return int(row_id)
        if row[1] != unit:
            raise ArchiveError(f"{self.path}: series {provider}/{zone} is in {row[1]}, refusing values in {unit}")
        return int(row[0])

    def write(self, provider: str, zone: str, *, forecasts: Iterable[tuple[int, int, float]] = (),
              actuals: Iterable[tuple[int, float]] = (), unit: str = UNIT) -> int:
        """Add (issued_at_s, target_time_s, value) forecast rows and (target_time_s, value) actuals in one
        transaction; a forecast row already present is kept as it is, an actual is replaced. Returns the rows
        written."""
        forecast_rows, actual_rows = list(forecasts), list(actuals)
        if not forecast_rows and not actual_rows:
            return 0
        with self._lock, self._errors("write"), self._transaction():
            series = self._series_id(provider, zone, unit)
            before = self._db.total_changes
            self._db.executemany("INSERT OR IGNORE INTO forecasts VALUES (?, ?, ?, ?)",
                                 ((series, int(i), int(t), float(v)) for i, t, v in forecast_rows))
            # A provider revises its actuals (estimated, then measured): the latest answer stands.
            self._db.executemany("INSERT OR REPLACE INTO actuals VALUES (?, ?, ?)",
                                 ((series, int(t), float(v)) for t, v in actual_rows))
            added = self._db.total_changes - before
        self._writes += 1
        if self.max_bytes is not None and self._writes % _SIZE_CHECK_EVERY == 1:
            self.prune()
        return added

    def size_bytes(self) -> int:
        """Pages in use × page size (the main file; the WAL is bounded by ``journal_size_limit``)."""
        with self._lock, self._errors("size"):
            pages = self._db.execute("PRAGMA page_count").fetchone()[0]
            free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
            return int((pages - free) * self._db.execute("PRAGMA page_size").fetchone()[0])

    def prune(self) -> int:
        """Delete the oldest forecasts of every series (and actuals older than any forecast left) until the
        file is under ``max_bytes`` × 0.8; returns the forecast rows deleted (0 when under the cap).

        Each series loses the same oldest fraction of its time span (its rows arrive at a steady cadence),
        found through the primary key: no index on the issue time is needed."""
        if self.max_bytes is None:
            return 0
        size = self.size_bytes()
        if size <= self.max_bytes:
            return 0
        fraction = 1.0 - _PRUNE_TO * self.max_bytes / size
        deleted = 0
        with self._lock, self._errors("prune"):
            with self._transaction():
                spans = self._db.execute("SELECT id, (SELECT MIN(issued_at) FROM forecasts WHERE series = s.id), "
                                         "(SELECT MAX(issued_at) FROM forecasts WHERE series = s.id) "
                                         "FROM series AS s").fetchall()
                for series, first, last in spans:
                    if first is None:
                        continue
                    cut = first + max(1, int(fraction * (last - first)) + 1)
                    deleted += self._db.execute("DELETE FROM forecasts WHERE series = ? AND issued_at < ?",
                                                (series, cut)).rowcount
                    self._db.execute("DELETE FROM actuals WHERE series = ? AND target_time < ?", (series, cut))
            self._db.execute("PRAGMA incremental_vacuum")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.pruned_rows += deleted
        return deleted

    def series(self) -> list[Series]:
        """Every series in the archive, with its row counts."""
        with self._lock, self._errors("read"):
            rows = self._db.execute(
                "SELECT s.provider, s.zone, s.unit, "
                "(SELECT COUNT(*) FROM forecasts WHERE series = s.id), "
                "(SELECT COUNT(*) FROM actuals WHERE series = s.id), "
                "(SELECT MIN(issued_at) FROM forecasts WHERE series = s.id), "
                "(SELECT MAX(issued_at) FROM forecasts WHERE series = s.id) "
                "FROM series AS s ORDER BY s.provider, s.zone").fetchall()
        return [Series(str(p), str(z), str(u), int(n), int(a), f, l) for p, z, u, n, a, f, l in rows]

    def forecast_rows(self, provider: str, zone: str, *, issued_from_s: int | None = None,
                      issued_to_s: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(issued_at_s, target_time_s, value) arrays of one series, ordered by issue then target.

        Rows whose times are not integers or whose value is not a number are left out (a foreign
        writer's); ``Archive.read_series`` reports them."""
        query = ("SELECT issued_at, target_time, value FROM forecasts WHERE series = "
                 "(SELECT id FROM series WHERE provider = ? AND zone = ?)")
        args: list[object] = [provider, zone]
        if issued_from_s is not None:
            query += " AND issued_at >= ?"
            args.append(int(issued_from_s))
        if issued_to_s is not None:
            query += " AND issued_at <= ?"
            args.append(int(issued_to_s))
        query += " AND typeof(issued_at) = 'integer' AND typeof(target_time) = 'integer'" \
                 " AND typeof(value) IN ('real', 'integer') ORDER BY issued_at, target_time"
        with self._lock, self._errors("read"):
            rows = self._db.execute(query, args).fetchall()
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), np.zeros(0)
        data = np.array(rows, dtype=np.float64)
        return data[:, 0].astype(np.int64), data[:, 1].astype(np.int64), data[:, 2]

    def malformed_rows(self, provider: str, zone: str) -> int:
        """Rows of one series a foreign writer left with non-integer times or a non-numeric value."""
        with self._lock, self._errors("read"):
            return int(self._db.execute(
                "SELECT COUNT(*) FROM forecasts WHERE series = (SELECT id FROM series WHERE provider = ? AND "
                "zone = ?) AND NOT (typeof(issued_at) = 'integer' AND typeof(target_time) = 'integer' AND "
                "typeof(value) IN ('real', 'integer'))", (provider, zone)).fetchone()[0])

    def actual_rows(self, provider: str, zone: str) -> tuple[np.ndarray, np.ndarray]:
        """(target_time_s, value) actuals of one series, in time order."""
        with self._lock, self._errors("read"):
            rows = self._db.execute(
                "SELECT target_time, value FROM actuals WHERE series = (SELECT id FROM series WHERE provider = ? "
                "AND zone = ?) AND typeof(target_time) = 'integer' AND typeof(value) IN ('real', 'integer') "
                "ORDER BY target_time", (provider, zone)).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        data = np.array(rows, dtype=np.float64)
        return data[:, 0].astype(np.int64), data[:, 1]

    def check(self) -> str:
        """SQLite's ``PRAGMA quick_check`` verdict ('ok' when the file is sound)."""
        with self._lock, self._errors("check"):
            return str(self._db.execute("PRAGMA quick_check").fetchone()[0])

    def close(self) -> None:
        """Close the connection (the WAL is checkpointed by SQLite when the last one closes)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> ForecastArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

