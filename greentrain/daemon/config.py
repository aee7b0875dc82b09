"""The daemon's TOML configuration: socket, who may connect, per-GPU limits, node policy.

Example (``/etc/greentrain/daemon.toml``)::

    [daemon]
    socket = "/run/greentrain/daemon.sock"
    group = "greentrain"           # members may connect (socket mode 0660)
    state_dir = "/var/lib/greentrain"
    admin_uids = [0]               # may see every job in `status` (others see their own)
    max_connections = 1024         # in total ...
    max_connections_per_uid = 256  # ... and per user
    idle_timeout_s = 600           # close connections that hold nothing and say nothing

    [gpu_access]                   # optional allow-list: user (name or uid) -> GPU indices/UUIDs
    alice = ["0", "1"]             # on top of each job's CUDA_VISIBLE_DEVICES and device cgroup

    [limits]                       # every GPU
    min_power_limit_w = 150
    max_power_limit_w = 350
    allow_clock_lock = true

    [gpu."GPU-5f3c..."]            # one GPU, by UUID or index ("0")
    max_power_limit_w = 250

    [node_policy]                  # cap every GPU while the grid is dirty
    trace = "/etc/greentrain/DE_2023_hourly.csv"
    dirty_above_g_per_kwh = 350
    dirty_power_limit_w = 200
    interval_s = 300
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeGuard

from greentrain.errors import ConfigError, InvalidConfig
from greentrain.fields import did_you_mean
from greentrain.tables import Problem, read_table
from greentrain.userfile import load_toml

__all__ = ["GPULimits", "NodePolicyConfig", "DaemonConfig", "DaemonSection", "load_config", "parse_config",
           "DEFAULT_SOCKET"]

DEFAULT_SOCKET = Path("/run/greentrain/daemon.sock")


@dataclass(frozen=True, slots=True, kw_only=True)
class GPULimits:
    """Bounds the daemon enforces on client requests for one GPU."""

    min_power_limit_w: float | None = None
    """Requests below this are refused (None: the GPU's own minimum)."""
    max_power_limit_w: float | None = None
    """Requests above this are refused (None: the GPU's own maximum)."""
    allow_clock_lock: bool = True
    """Whether clients may lock SM clocks."""
    min_sm_clock_mhz: float | None = None
    """Lowest SM clock a client may lock to (any number > 0 is accepted, as for the power limits)."""

    def __post_init__(self) -> None:
        problems = [(name, _POSITIVE.format(value=value)) for name, value in (
            ("min_power_limit_w", self.min_power_limit_w), ("max_power_limit_w", self.max_power_limit_w),
            ("min_sm_clock_mhz", self.min_sm_clock_mhz)) if value is not None and not _positive(value)]
        low, high = self.min_power_limit_w, self.max_power_limit_w
        if not problems and low is not None and high is not None and low > high:
            problems.append(("min_power_limit_w", f"{low:g} is above max_power_limit_w ({high:g})"))
        if problems:
            raise InvalidConfig(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePolicyConfig:
    """Cap every GPU's power limit while grid intensity is above a threshold."""

    dirty_above_g_per_kwh: float
    """Intensity (gCO2eq/kWh) above which the grid counts as dirty."""
    dirty_power_limit_w: float
    """Power limit applied to every GPU while dirty (clients may go lower, not higher)."""
    trace: Path | None = None
    """Electricity Maps CSV export to read the current intensity from."""
    provider: str | None = None
    """Alternatively a provider plugin name (greentrain.providers) ..."""
    zone: str | None = None
    """... and its zone."""
    provider_options: dict[str, object] = field(default_factory=dict)
    """Keyword arguments for the provider plugin."""
    interval_s: float = 300.0
    """How often to re-check the grid, seconds (>= 1)."""

    def __post_init__(self) -> None:
        problems = [(name, _POSITIVE.format(value=value)) for name, value in (
            ("dirty_above_g_per_kwh", self.dirty_above_g_per_kwh),
            ("dirty_power_limit_w", self.dirty_power_limit_w)) if not _positive(value)]
        if not (_positive(self.interval_s) and self.interval_s >= 1):
            problems.append(("interval_s", f"must be a number >= 1 and finite, got {self.interval_s!r}"))
        if (self.trace is None) == (self.provider is None):
            problems.append(("trace", "give exactly one of 'trace' (CSV path) or 'provider' (+ 'zone')"))
        elif self.provider is not None and self.zone is None:
            problems.append(("zone", "'provider' needs 'zone'"))
        if problems:
            raise InvalidConfig(problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonSection:
    """The ``[daemon]`` table: the socket, who may connect, and the connection limits."""

    socket: Path = DEFAULT_SOCKET
    """Unix socket path."""
    group: str | None = None
    """Group that owns the socket; its members may connect. None: root only."""
    socket_mode: str | int = "0660"
    """Permission bits of the socket file: octal text ('0660') or a TOML octal number (0o660)."""
    allowed_uids: tuple[int, ...] = ()
    """Extra uids allowed to send requests (checked with SO_PEERCRED)."""
    state_dir: Path = Path("/var/lib/greentrain")
    """Journal and lock directory."""
    admin_uids: tuple[int, ...] = (0,)
    """Uids whose ``status`` shows every job's pid and name (others see only their own)."""
    max_connections: int = 1024
    """Connections served at once; more are refused with an error line."""
    max_connections_per_uid: int = 256
    """Connections one uid may hold at once."""
    idle_timeout_s: float = 600.0
    """A connection that holds no GPU setting and sends nothing this long is closed."""

    def __post_init__(self) -> None:
        problems = [(name, f"must be in [1, 1000000], got {value!r}") for name, value in (
            ("max_connections", self.max_connections), ("max_connections_per_uid", self.max_connections_per_uid),
            ("idle_timeout_s", self.idle_timeout_s)) if not 1 <= value <= 1_000_000]
        try:
            self.mode()
        except ConfigError as e:
            problems.append(("socket_mode", str(e)))
        if problems:
            raise InvalidConfig(problems)

    def mode(self) -> int:
        """The socket's permission bits; ConfigError for text that is not octal or a mode open to every user."""
        try:
            mode = self.socket_mode if isinstance(self.socket_mode, int) else int(self.socket_mode, 8)
        except ValueError:
            raise ConfigError(f"{self.socket_mode!r} is not octal like '0660'") from None
        if mode & 0o007:
            raise ConfigError(f"{self.socket_mode!r} gives access to every user; use 0660 or 0600")
        return mode


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig(DaemonSection):
    """Everything ``greentrain daemon`` reads from its TOML file: the ``[daemon]`` table's settings and
    the GPU tables."""

    limits: GPULimits = GPULimits()
    """Limits for every GPU."""
    gpu_limits: dict[str, GPULimits] = field(default_factory=dict)
    """Per-GPU overrides by UUID or index string."""
    node_policy: NodePolicyConfig | None = None
    gpu_access: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Allow-list: user name or uid (or '*') -> GPU indices/UUIDs it may change. Empty: no list."""

    def limits_for(self, uuid: str, index: int) -> GPULimits:
        """Limits of one GPU: its own table over the [limits] defaults."""
        override = self.gpu_limits.get(uuid) or self.gpu_limits.get(str(index))
        if override is None:
            return self.limits
        merged = {k: getattr(override, k) for k in GPULimits.__dataclass_fields__ if getattr(override, k) is not None}
        return replace(self.limits, **merged)


_POSITIVE = "must be a number > 0 and finite, got {value!r}"
_TABLES = ("daemon", "limits", "gpu", "node_policy", "gpu_access")


def _positive(value: object) -> TypeGuard[float]:
    """A real number (not a bool), finite and > 0 (TOML allows nan and inf)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value > 0


def _table(raw: Mapping[str, object], key: str, problems: list[Problem], prefix: str = "") -> Mapping[str, object]:
    value = raw.get(key, {})
    if isinstance(value, dict):
        return value
    problems.append((f"{prefix}{key}", f"must be a table [{prefix}{key}]"))
    return {}


def parse_config(raw: Mapping[str, object], where: str = "daemon config") -> DaemonConfig:
    """Validate a parsed TOML document (``greentrain.tables``, the reader of every settings file): one
    ConfigError with every problem, one line each, naming ``where`` and the key."""
    problems: list[Problem] = []
    for name in raw:
        if name not in _TABLES:
            problems.append(("", f"unknown table [{name}]{did_you_mean(name, _TABLES)}; valid: {', '.join(_TABLES)}"))
    daemon = read_table(DaemonSection, _table(raw, "daemon", problems), "daemon", problems)
    limits = read_table(GPULimits, _table(raw, "limits", problems), "limits", problems) or GPULimits()
    gpus = _table(raw, "gpu", problems)
    gpu_limits = {}
    for key in gpus:  # a GPU's table that says nothing of clock locking keeps [limits]'s: never re-enabled by silence
        own = read_table(GPULimits, _table(gpus, key, problems, "gpu."), f"gpu.{key}", problems,
                         defaults={"allow_clock_lock": limits.allow_clock_lock})
        if own is not None:
            gpu_limits[key] = own
    node_policy = None
    if "node_policy" in raw:
        node_policy = read_table(NodePolicyConfig, _table(raw, "node_policy", problems), "node_policy", problems)
    gpu_access: dict[str, tuple[str, ...]] = {}
    for user, allowed in _table(raw, "gpu_access", problems).items():
        if not isinstance(allowed, list) or not all(isinstance(g, str) and g.isprintable() for g in allowed):
            problems.append((f"gpu_access.{user}", "must be a list of GPU indices or UUIDs as strings"))
        else:
            gpu_access[str(user)] = tuple(allowed)
    if problems or daemon is None:
        raise ConfigError("\n".join(f"{where}: {key}: {why}" if key else f"{where}: {why}" for key, why in problems))
    settings = {name: getattr(daemon, name) for name in DaemonSection.__dataclass_fields__}
    return DaemonConfig(**settings | {"socket_mode": daemon.mode(), "idle_timeout_s": float(daemon.idle_timeout_s)},
                        limits=limits, gpu_limits=gpu_limits, node_policy=node_policy, gpu_access=gpu_access)


def load_config(path: str | Path) -> DaemonConfig:
    """Read and validate the TOML file at ``path``."""
    path = Path(path)
    return parse_config(load_toml(path, what="daemon config"), str(path))
