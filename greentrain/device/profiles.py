"""Measured GPU power-limit profiles (Zeus NSDI '23 artifact), shipped with the package.

Each CSV row is one training workload at one power limit: time per epoch and
average power. The simulator and the fake GPU use these instead of invented
curves. See ``greentrain/data/README.md`` for provenance.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from greentrain.errors import ConfigError

__all__ = ["ProfilePoint", "GPUProfile", "load_gpu_profile", "interpolate", "BUILTIN_GPUS"]

BUILTIN_GPUS = ("v100", "a40", "rtx6000")


@dataclass(frozen=True, slots=True)
class ProfilePoint:
    """One measured operating point."""

    power_limit_w: float
    time_per_epoch_s: float
    average_power_w: float

    @property
    def energy_per_epoch_j(self) -> float:
        return self.time_per_epoch_s * self.average_power_w


def interpolate(points: list[ProfilePoint], power_limit_w: float) -> ProfilePoint:
    """The operating point at ``power_limit_w``: linear between measured limits, clamped at the ends.

    ``points`` are one workload's points, highest limit first (as ``GPUProfile.points`` returns them).
    """
    if power_limit_w >= points[0].power_limit_w:
        return points[0]
    for hi, lo in zip(points, points[1:]):
        if lo.power_limit_w <= power_limit_w <= hi.power_limit_w:
            f = (power_limit_w - lo.power_limit_w) / (hi.power_limit_w - lo.power_limit_w)
            return ProfilePoint(
                power_limit_w,
                lo.time_per_epoch_s + f * (hi.time_per_epoch_s - lo.time_per_epoch_s),
                lo.average_power_w + f * (hi.average_power_w - lo.average_power_w),
            )
    return points[-1]


class GPUProfile:
    """All workloads measured on one GPU model; workloads are named 'dataset/network'."""

    def __init__(self, gpu: str, rows: dict[tuple[str, int], list[ProfilePoint]], source: str) -> None:
        self.gpu = gpu
        self.source = source
        self._rows = rows

    def workloads(self) -> list[str]:
        return sorted({w for w, _ in self._rows})

    def batch_sizes(self, workload: str) -> list[int]:
        sizes = sorted(b for w, b in self._rows if w == workload)
        if not sizes:
            raise ConfigError(f"workload {workload!r} not in profile {self.source}; valid: {', '.join(self.workloads())}")
        return sizes

    def default_batch_size(self, workload: str) -> int:
        """The batch size with the lowest energy per epoch at the maximum power limit."""
        sizes = self.batch_sizes(workload)
        return min(sizes, key=lambda b: self._rows[(workload, b)][0].energy_per_epoch_j)

    def points(self, workload: str, batch_size: int | None = None) -> list[ProfilePoint]:
        """Operating points, highest power limit first."""
        size = self.default_batch_size(workload) if batch_size is None else batch_size
        if (workload, size) not in self._rows:
            raise ConfigError(
                f"batch size {size} not measured for {workload!r} in {self.source}; "
                f"valid: {', '.join(map(str, self.batch_sizes(workload)))}"
            )
        return list(self._rows[(workload, size)])


def load_gpu_profile(gpu_or_path: str | Path) -> GPUProfile:
    """Load a built-in profile by GPU name ('v100', 'a40', 'rtx6000') or a CSV path in the same format."""
    text = str(gpu_or_path)
    if text.lower() in BUILTIN_GPUS:
        ref = resources.files("greentrain.data").joinpath(f"gpu-profiles/summary_power_{text.lower()}.csv")
        content, source, gpu = ref.read_text(encoding="utf-8"), f"builtin:{text.lower()}", text.lower()
    else:
        path = Path(text)
        from greentrain.userfile import TRACE_MAX_BYTES, read_text

        try:
            content = read_text(path, what="GPU profile", max_bytes=TRACE_MAX_BYTES)
        except ConfigError as e:
            raise ConfigError(f"{e}; or use one of {', '.join(BUILTIN_GPUS)}") from None
        source, gpu = str(path), path.stem.removeprefix("summary_power_")
    rows: dict[tuple[str, int], list[ProfilePoint]] = {}
    reader = csv.DictReader(content.splitlines())
    need = {"dataset", "network", "batch_size", "power_limit", "time_per_epoch", "average_power"}
    if not need <= set(reader.fieldnames or []):
        raise ConfigError(f"{source}: missing column(s) {sorted(need - set(reader.fieldnames or []))}")
    # Some workloads were measured with two optimizers; keep the one measured most (the
    # paper's default for that workload) so each power limit has exactly one point.
    all_rows = list(reader)
    optimizer_counts: dict[str, dict[str, int]] = {}
    for row in all_rows:
        counts = optimizer_counts.setdefault(f"{row['dataset']}/{row['network']}", {})
        counts[row.get("optimizer", "")] = counts.get(row.get("optimizer", ""), 0) + 1
    for row_no, row in enumerate(all_rows, start=2):
        workload = f"{row['dataset']}/{row['network']}"
        counts = optimizer_counts[workload]
        if row.get("optimizer", "") != max(counts, key=lambda o: (counts[o], o)):
            continue
        try:
            key = (workload, int(row["batch_size"]))
            point = ProfilePoint(float(row["power_limit"]), float(row["time_per_epoch"]), float(row["average_power"]))
        except ValueError:
            raise ConfigError(f"{source}:{row_no}: non-numeric value") from None
        if point.time_per_epoch_s <= 0 or point.average_power_w <= 0:
            raise ConfigError(f"{source}:{row_no}: time and power must be > 0")
        rows.setdefault(key, []).append(point)
    for points in rows.values():
        points.sort(key=lambda p: -p.power_limit_w)
    return GPUProfile(gpu, rows, source)
