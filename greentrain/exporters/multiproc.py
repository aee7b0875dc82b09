"""One metrics endpoint per node for a multi-rank job.

Every local rank other than the leader (LOCAL_RANK 0) writes its current
samples to ``<dir>/greentrain-<job>-rank<N>.json`` once per ``interval_s``
(atomic replace, from a daemon thread, never from the training step). The
leader serves one endpoint that merges its own live samples with those files,
using each metric's ``merge`` rule from ``names.py``.

Why not prometheus-client's multiprocess mode: it aggregates only its own
Counter/Gauge objects (mmap files per pid) and needs an environment variable
set before import, whereas greentrain exports a custom collector over live
state. Its per-pid summing would also count a RAPL package or a broadcast
policy action once per rank; the per-metric rules here count shared devices
once (``max``), per-rank accruals once each (``sum``) and leader-only state
from the leader (``first``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from greentrain.errors import ConfigError
import greentrain.exporters.names as n
from greentrain.exporters.collector import Sample, families

__all__ = ["NodeCollector", "RankFiles", "RankWriter", "merge"]

log = logging.getLogger(__name__)

STALE_GRACE_S = 30.0
"""A follower file last written this long before the leader started belongs to an earlier run."""


def merge(per_rank: list[list[Sample]]) -> list[Sample]:
    """Combine samples of several ranks (leader first) by each metric's merge rule."""
    merged: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for samples in per_rank:
        for name, labels, value in samples:
            key = (name, labels)
            if key not in merged:
                merged[key] = value
                continue
            rule = n.BY_NAME[name].merge if name in n.BY_NAME else "first"
            if rule == "sum":
                merged[key] += value
            elif rule == "max":
                merged[key] = max(merged[key], value)
    return [(name, labels, value) for (name, labels), value in merged.items()]


class RankFiles:
    """The per-rank sample files of one job in one directory."""

    def __init__(self, directory: str | os.PathLike[str], *, job: str, run_id: str = "") -> None:
        self.directory = Path(directory)
        self.job = job
        self.run_id = run_id
        self._stem = "greentrain-" + re.sub(r"[^A-Za-z0-9_.-]", "_", job) + "-rank"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"metrics multiprocess dir {self.directory}: cannot create ({e.strerror})") from None

    def path(self, rank: int) -> Path:
        return self.directory / f"{self._stem}{rank}.json"

    def write(self, rank: int, samples: list[Sample]) -> None:
        """Atomically replace this rank's file."""
        body = {"job": self.job, "run_id": self.run_id, "rank": rank, "pid": os.getpid(),
                "written_at": time.time(), "samples": [[s[0], [list(kv) for kv in s[1]], s[2]] for s in samples]}
        target = self.path(rank)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(body), encoding="utf-8")
        os.replace(tmp, target)

    def read_others(self, own_rank: int, not_before: float = 0.0) -> list[tuple[int, list[Sample]]]:
        """Samples of every other rank of this job and run, by rank; unreadable files are skipped.

        Files last written before ``not_before`` (Unix s) are left over from an earlier run and ignored.
        """
        found: list[tuple[int, list[Sample]]] = []
        for path in self.directory.glob(f"{self._stem}*.json"):
            try:
                body = json.loads(path.read_text(encoding="utf-8"))
                rank = int(body["rank"])
                if body.get("job") != self.job or body.get("run_id", "") != self.run_id or rank == own_rank \
                        or float(body.get("written_at", 0.0)) < not_before:
                    continue
                samples = [(str(s[0]), tuple((str(k), str(v)) for k, v in s[1]), float(s[2])) for s in body["samples"]]
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                continue  # being replaced right now, or not ours
            found.append((rank, samples))
        return sorted(found)


class RankWriter:
    """Daemon thread that writes one rank's samples every ``interval_s`` (and once more at stop)."""

    def __init__(self, files: RankFiles, rank: int, samples: Callable[[], list[Sample]],
                 interval_s: float = 1.0) -> None:
        self._files, self._rank, self._samples, self._interval_s = files, rank, samples, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"greentrain-rank{rank}-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10.0)
        self._write()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._write()
            self._stop.wait(self._interval_s)

    def _write(self) -> None:
        try:
            self._files.write(self._rank, self._samples())
        except Exception as e:  # metrics must never take a rank down
            log.warning("metrics: writing rank %d file failed: %s", self._rank, e)


class NodeCollector(Collector):
    """The leader's collector: its own live samples merged with the other local ranks' files."""

    def __init__(self, own: Callable[[], list[Sample]], files: RankFiles, own_rank: int = 0,
                 stale_before_s: float = STALE_GRACE_S) -> None:
        self._own, self._files, self._own_rank = own, files, own_rank
        # Live followers rewrite their file every second; one untouched since well before we started is a
        # leftover of an earlier run in the same directory and must not add its counters to ours.
        self._not_before = time.time() - stale_before_s

    def samples(self) -> list[Sample]:
        others = self._files.read_others(self._own_rank, self._not_before)
        merged = merge([self._own()] + [s for _, s in others])
        merged.append((n.EXPORTER_RANKS.name, (("job", self._files.job),), float(1 + len(others))))
        return merged

    def collect(self) -> Iterator[Metric]:
        yield from families(self.samples())

    def describe(self) -> list[Metric]:
        return []
