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
from dataclasses import dataclass, field, replace
from pathlib import Path
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

from greentrain.errors import ConfigError
from greentrain.userfile import JSONObject, load_toml

__all__ = ["GPULimits", "NodePolicyConfig", "DaemonConfig", "load_config", "parse_config", "DEFAULT_SOCKET"]

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
    min_sm_clock_mhz: int | None = None
    """Lowest SM clock a client may lock to."""


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
    provider_options: JSONObject = field(default_factory=dict)
    """Keyword arguments for the provider plugin."""
    interval_s: float = 300.0
    """How often to re-check the grid."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig:
    """Everything ``greentrain daemon`` reads from its TOML file."""

    socket: Path = DEFAULT_SOCKET
    """Unix socket path."""
    group: str | None = None
    """Group that owns the socket; its members may connect. None: root only."""
    socket_mode: int = 0o660
    """Permission bits of the socket file."""
    allowed_uids: tuple[int, ...] = ()
    """Extra uids allowed to send requests (checked with SO_PEERCRED)."""
    state_dir: Path = Path("/var/lib/greentrain")
    """Journal and lock directory."""
    limits: GPULimits = GPULimits()
    """Limits for every GPU."""
    gpu_limits: dict[str, GPULimits] = field(default_factory=dict)
    """Per-GPU overrides by UUID or index string."""
    node_policy: NodePolicyConfig | None = None
    admin_uids: tuple[int, ...] = (0,)
    """Uids whose ``status`` shows every job's pid and name (others see only their own)."""
    max_connections: int = 1024
    """Connections served at once; more are refused with an error line."""
    max_connections_per_uid: int = 256
    """Connections one uid may hold at once."""
    idle_timeout_s: float = 600.0
    """A connection that holds no GPU setting and sends nothing this long is closed."""
    gpu_access: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Allow-list: user name or uid (or '*') -> GPU indices/UUIDs it may change. Empty: no list."""

    def limits_for(self, uuid: str, index: int) -> GPULimits:
        """Limits of one GPU: its own table over the [limits] defaults."""
        override = self.gpu_limits.get(uuid) or self.gpu_limits.get(str(index))
        if override is None:
            return self.limits
        merged = {k: getattr(override, k) for k in GPULimits.__dataclass_fields__ if getattr(override, k) is not None}
        return replace(self.limits, **merged)


def _table(raw: JSONObject, key: str, where: str) -> JSONObject:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    return value


def _positive(value: object) -> bool:
    """A real number (not a bool), finite and > 0 (TOML allows nan and inf)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value > 0


def _limits(raw: JSONObject, where: str) -> GPULimits:
    known = set(GPULimits.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid: {sorted(known)}")
    for key in ("min_power_limit_w", "max_power_limit_w", "min_sm_clock_mhz"):
        value = raw.get(key)
        if value is not None and not _positive(value):
            raise ConfigError(f"{where}.{key}: must be a number > 0 and finite, got {value!r}")
    if not isinstance(raw.get("allow_clock_lock", True), bool):
        raise ConfigError(f"{where}.allow_clock_lock: must be true or false")
    limits = GPULimits(**raw)
    if limits.min_power_limit_w and limits.max_power_limit_w and limits.min_power_limit_w > limits.max_power_limit_w:
        raise ConfigError(f"{where}: min_power_limit_w > max_power_limit_w")
    return limits


def _node_policy(raw: JSONObject, where: str) -> NodePolicyConfig:
    known = set(NodePolicyConfig.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid: {sorted(known)}")
    for key in ("dirty_above_g_per_kwh", "dirty_power_limit_w"):
        if key not in raw:
            raise ConfigError(f"{where}: missing {key}")
        if not _positive(raw[key]):
            raise ConfigError(f"{where}.{key}: must be a number > 0 and finite, got {raw[key]!r}")
    if ("trace" in raw) == ("provider" in raw):
        raise ConfigError(f"{where}: give exactly one of 'trace' (CSV path) or 'provider' (+ 'zone')")
    if "provider" in raw and "zone" not in raw:
        raise ConfigError(f"{where}: 'provider' needs 'zone'")
    interval_s = raw.get("interval_s", 300.0)
    if not _positive(interval_s) or interval_s < 1:
        raise ConfigError(f"{where}.interval_s: must be a number >= 1 and finite, got {interval_s!r}")
    values = dict(raw)
    if "trace" in values:
        values["trace"] = Path(values["trace"])
    return NodePolicyConfig(**values)


def parse_config(raw: JSONObject, where: str = "daemon config") -> DaemonConfig:
    """Validate a parsed TOML document; one ConfigError listing every problem, one line each."""
    errors: list[str] = []

    def check(parse: Callable[..., T], *args: object, default: T | None = None) -> T | None:
        try:
            return parse(*args)
        except ConfigError as e:
            errors.append(str(e))
            return default

    unknown = set(raw) - {"daemon", "limits", "gpu", "node_policy", "gpu_access"}
    if unknown:
        errors.append(f"{where}: unknown table(s) {sorted(unknown)}; valid: daemon, limits, gpu, node_policy, gpu_access")
    daemon = check(_table, raw, "daemon", where, default={})
    bad = set(daemon) - {"socket", "group", "socket_mode", "allowed_uids", "state_dir", "admin_uids",
                         "max_connections", "max_connections_per_uid", "idle_timeout_s"}
    if bad:
        errors.append(f"{where}: [daemon] unknown key(s) {sorted(bad)}")
    socket_mode = check(_socket_mode, daemon.get("socket_mode", "0660"), where, default=0o660)
    uids = check(_uid_list, daemon, "allowed_uids", [], where, default=())
    admins = check(_uid_list, daemon, "admin_uids", [0], where, default=(0,))
    caps = {}
    for key, default, low in (("max_connections", 1024, 1), ("max_connections_per_uid", 256, 1),
                              ("idle_timeout_s", 600.0, 1)):
        value = daemon.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= 1_000_000:
            errors.append(f"{where}: daemon.{key} must be a number in [{low}, 1000000], got {value!r}")
            value = default
        caps[key] = value if key == "idle_timeout_s" else int(value)
    access = check(_table, raw, "gpu_access", where, default={})
    for user, allowed in access.items():
        if not isinstance(allowed, list) or not all(isinstance(g, str) and g.isprintable() for g in allowed):
            errors.append(f"{where}: gpu_access.{user} must be a list of GPU indices or UUIDs as strings")
    gpus = check(_table, raw, "gpu", where, default={})
    limits = check(lambda: _limits(_table(raw, "limits", where), f"{where}: [limits]"))
    gpu_limits = {k: check(lambda k=k: _limits(_table(gpus, k, where), f"{where}: [gpu.{k!r}]")) for k in gpus}
    node_policy = (check(_node_policy, raw["node_policy"], f"{where}: [node_policy]")
                   if "node_policy" in raw else None)
    if errors:
        raise ConfigError("\n".join(errors))
    return DaemonConfig(
        admin_uids=tuple(admins),
        gpu_access={str(user): tuple(allowed) for user, allowed in access.items()},
        max_connections=caps["max_connections"],
        max_connections_per_uid=caps["max_connections_per_uid"],
        idle_timeout_s=float(caps["idle_timeout_s"]),
        socket=Path(daemon.get("socket", DEFAULT_SOCKET)),
        group=daemon.get("group"),
        socket_mode=socket_mode,
        allowed_uids=tuple(uids),
        state_dir=Path(daemon.get("state_dir", "/var/lib/greentrain")),
        limits=limits,
        gpu_limits=gpu_limits,
        node_policy=node_policy,
    )


def _socket_mode(mode: object, where: str) -> int:
    try:
        socket_mode = int(str(mode), 8)
    except ValueError:
        raise ConfigError(f"{where}: daemon.socket_mode {mode!r} is not octal like '0660'") from None
    if socket_mode & 0o007:
        raise ConfigError(f"{where}: daemon.socket_mode {mode!r} gives access to every user; use 0660 or 0600")
    return socket_mode


def _uid_list(daemon: JSONObject, key: str, default: list[int], where: str) -> tuple[int, ...]:
    uids = daemon.get(key, default)
    if not isinstance(uids, list) or not all(isinstance(u, int) and not isinstance(u, bool) for u in uids):
        raise ConfigError(f"{where}: daemon.{key} must be a list of integers")
    return tuple(uids)


def load_config(path: str | Path) -> DaemonConfig:
    """Read and validate the TOML file at ``path``."""
    path = Path(path)
    return parse_config(load_toml(path, what="daemon config"), str(path))
