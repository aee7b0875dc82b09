"""Profile cache: recurring jobs on the same GPU model and workload skip re-profiling.

A profile is stored as one JSON file named by a hash of its key (GPU model,
workload fingerprint, knob, candidate settings, world size). A corrupt or
foreign file is ignored with a warning and overwritten by the next profile —
a cache can only cost a re-profile, never a wrong answer from bad data.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from greentrain.userfile import JSONObject, JSONValue

if TYPE_CHECKING:
    from torch.nn import Module

from greentrain.policies.base import OperatingPoint

__all__ = ["ProfileCache", "workload_fingerprint", "default_cache_dir"]

log = logging.getLogger(__name__)
_FORMAT = 1


def default_cache_dir() -> Path:
    """``$GREENTRAIN_CACHE_DIR`` or ``$XDG_CACHE_HOME/greentrain/profiles`` (~/.cache/...)."""
    env = os.environ.get("GREENTRAIN_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "greentrain" / "profiles"


def workload_fingerprint(model: Module | None = None, *, batch_size: int | None = None, extra: str = "") -> str:
    """A short stable hash of what determines a step's cost: parameter names/shapes/dtypes, batch size, ``extra``."""
    digest = hashlib.sha256()
    if model is not None:
        for name, param in model.named_parameters():
            digest.update(f"{name}:{tuple(param.shape)}:{param.dtype};".encode())
    digest.update(f"batch={batch_size};extra={extra}".encode())
    return digest.hexdigest()[:16]


def _point_to_json(p: OperatingPoint) -> JSONObject:
    return {"power_limit_w": p.power_limit_w, "sm_clocks_mhz": list(p.sm_clocks_mhz) if p.sm_clocks_mhz else None,
            "relative_speed": p.relative_speed, "power_w": p.power_w}


def _scalar(value: JSONValue) -> str | int | float:
    """``value`` for ``float()``/``int()``; TypeError (a corrupt file, as ``load`` treats it) for null, a list or
    an object."""
    if value is None or isinstance(value, (list, dict)):
        raise TypeError(f"expected a number, got {value!r}")
    return value


def _point_from_json(raw: JSONObject) -> OperatingPoint:
    clocks, sm_clocks_mhz = raw.get("sm_clocks_mhz"), None
    if clocks:
        if not isinstance(clocks, list):
            raise TypeError(f"sm_clocks_mhz: expected a list, got {clocks!r}")
        sm_clocks_mhz = (int(_scalar(clocks[0])), int(_scalar(clocks[1])))
    power_limit_w = raw.get("power_limit_w")
    return OperatingPoint(
        power_limit_w=None if power_limit_w is None else float(_scalar(power_limit_w)),
        sm_clocks_mhz=sm_clocks_mhz,
        relative_speed=float(_scalar(raw["relative_speed"])),
        power_w=float(_scalar(raw["power_w"])),
    )


class ProfileCache:
    """Directory of cached profiles."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    @staticmethod
    def key(gpu_model: str, fingerprint: str, knob: str, candidates: Sequence[float | tuple[int, int]],
            world_size: int = 1) -> JSONObject:
        """The identity of a profile."""
        return {"format": _FORMAT, "gpu_model": gpu_model, "fingerprint": fingerprint, "knob": knob,
                "candidates": [list(c) if isinstance(c, tuple) else c for c in candidates], "world_size": world_size}

    def _path(self, key: JSONObject) -> Path:
        name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
        return self.directory / f"{name}.json"

    def load(self, key: JSONObject) -> tuple[OperatingPoint, ...] | None:
        """The cached points, or None (missing, corrupt, or another key's file)."""
        path = self._path(key)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("key") != json.loads(json.dumps(key)):
                log.warning("profile cache %s belongs to another key; ignoring", path)
                return None
            return tuple(_point_from_json(p) for p in raw["points"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            log.warning("profile cache %s unreadable (%s); profiling again", path, e)
            return None

    def store(self, key: JSONObject, points: tuple[OperatingPoint, ...]) -> Path | None:
        """Write atomically; a read-only cache only logs (profiling results are still used)."""
        path = self._path(key)
        body = {"key": key, "created": datetime.now(UTC).isoformat(), "points": [_point_to_json(p) for p in points]}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".profile-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(body, handle, indent=1)
            os.replace(tmp, path)
        except OSError as e:
            log.warning("profile cache %s not written (%s)", path, e.strerror or e)
            return None
        return path
