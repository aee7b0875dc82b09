"""CPU model detection and TDP lookup in CodeCarbon's CPU table.

CodeCarbon 3.3.2 ships ``codecarbon/data/hardware/cpu_power.csv`` (about 4,900
models with their TDP). We read that resource from the installed codecarbon
package and match names the way CodeCarbon does (exact name, then the name
without "(R)", "CPU @ x GHz" and similar noise, then a unique token-set
match), without importing pandas, so ``greentrain monitor`` starts fast. An
unknown model falls back to CodeCarbon's own rule: 4 W per hardware thread
(``codecarbon.core.cpu.DEFAULT_POWER_PER_CORE``).
"""

from __future__ import annotations

import csv
import functools
import os
import platform
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = ["TDPInfo", "detect_cpu_model", "lookup_tdp", "DEFAULT_POWER_PER_THREAD_W"]

DEFAULT_POWER_PER_THREAD_W = 4.0
"""Fallback per hardware thread, CodeCarbon's DEFAULT_POWER_PER_CORE (checked against it at run time)."""


@dataclass(frozen=True, slots=True)
class TDPInfo:
    """A TDP figure and where it came from."""

    cpu_model: str
    tdp_w: float
    source: str
    """E.g. "codecarbon cpu_power.csv: 'Xeon Gold 6248'" or "default: 4 W x 16 threads"."""


def detect_cpu_model(cpuinfo_path: str | Path = "/proc/cpuinfo") -> str:
    """The CPU's marketing name ('model name' in /proc/cpuinfo), else platform.processor(), else 'unknown'."""
    try:
        for line in Path(cpuinfo_path).read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model Name") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _normalise(name: str) -> str:
    text = re.sub(r"\((R|TM|tm|r)\)", "", name)
    text = re.sub(r"\s+CPU\s*@.*$", "", text)
    text = re.sub(r"@\s*\d+(\.\d+)?\s*GHz", "", text)
    text = re.sub(r"\b(CPU|Processor|\d+-Core)\b", "", text)
    return " ".join(text.lower().split())


@functools.lru_cache(maxsize=1)
def _codecarbon_table() -> dict[str, tuple[str, float]]:
    """normalised name -> (name as in the table, TDP W), from codecarbon's packaged CSV."""
    ref = resources.files("codecarbon").joinpath("data/hardware/cpu_power.csv")
    table: dict[str, tuple[str, float]] = {}
    for row in csv.DictReader(ref.read_text(encoding="utf-8").splitlines()):
        try:
            table.setdefault(_normalise(row["Name"]), (row["Name"], float(row["TDP"])))
        except (KeyError, ValueError):
            continue
    return table


def _match(model: str, table: dict[str, tuple[str, float]]) -> tuple[str, float] | None:
    key = _normalise(model)
    if key in table:
        return table[key]
    tokens = set(key.split())
    # CodeCarbon accepts a token-set match (one name's words contain the other's) only when unique.
    hits = [v for k, v in table.items() if (ks := set(k.split())) and (ks <= tokens or tokens <= ks) and len(ks) > 1]
    return hits[0] if len(hits) == 1 else None


def _default_per_thread_w() -> float:
    try:
        from codecarbon.core.cpu import DEFAULT_POWER_PER_CORE

        return float(DEFAULT_POWER_PER_CORE)
    except Exception:  # codecarbon missing or reorganised: keep the documented figure
        return DEFAULT_POWER_PER_THREAD_W


def lookup_tdp(cpu_model: str | None = None, threads: int | None = None) -> TDPInfo:
    """TDP of ``cpu_model`` (detected when None) from CodeCarbon's table, else 4 W x hardware threads."""
    model = cpu_model or detect_cpu_model()
    try:
        hit = _match(model, _codecarbon_table())
    except (OSError, ModuleNotFoundError):
        hit = None
    if hit is not None:
        return TDPInfo(model, hit[1], f"codecarbon cpu_power.csv: {hit[0]!r}")
    count = threads or os.cpu_count() or 1
    per_thread_w = _default_per_thread_w()
    return TDPInfo(
        model,
        per_thread_w * count,
        f"default: {per_thread_w:g} W x {count} threads (CodeCarbon's rule for unknown CPUs)",
    )
