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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeGuard, TypeVar

from greentrain.errors import ConfigError
from greentrain.userfile import load_toml

T = TypeVar("T")

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
    min_sm_clock_mhz: float | None = None
    """Lowest SM clock a client may lock to (any number > 0 is accepted, as for the power limits)."""


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


def _table(raw: Mapping[str, object], key: str, where: str) -> dict[str, object]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    return value


def _positive(value: object) -> TypeGuard[float]:
    """A real number (not a bool), finite and > 0 (TOML allows nan and inf)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value > 0


def _optional_positive(raw: Mapping[str, object], key: str, where: str) -> float | None:
    value = raw.get(key)
    if value is not None and not _positive(value):
        raise ConfigError(f"{where}.{key}: must be a number > 0 and finite, got {value!r}")
    return value


def _required_positive(raw: Mapping[str, object], key: str, where: str) -> float:
    if key not in raw:
        raise ConfigError(f"{where}: missing {key}")
    value = raw[key]
    if not _positive(value):
        raise ConfigError(f"{where}.{key}: must be a number > 0 and finite, got {value!r}")
    return value


def _optional_str(raw: Mapping[str, object], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}.{key}: must be a string, got {value!r}")
    return value


def _limits(raw: Mapping[str, object], where: str, allow_clock_lock_default: bool = True) -> GPULimits:
    """One limits table; a GPU's own table that leaves ``allow_clock_lock`` out keeps the [limits] value
    (``allow_clock_lock_default``): an override never turns clock locking back on by saying nothing."""
    known = set(GPULimits.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid: {sorted(known)}")
    min_w, max_w, min_mhz = (_optional_positive(raw, key, where)
                             for key in ("min_power_limit_w", "max_power_limit_w", "min_sm_clock_mhz"))
    allow_clock_lock = raw.get("allow_clock_lock", allow_clock_lock_default)
    if not isinstance(allow_clock_lock, bool):
        raise ConfigError(f"{where}.allow_clock_lock: must be true or false")
    limits = GPULimits(min_power_limit_w=min_w, max_power_limit_w=max_w, allow_clock_lock=allow_clock_lock,
                       min_sm_clock_mhz=min_mhz)
    if limits.min_power_limit_w and limits.max_power_limit_w and limits.min_power_limit_w > limits.max_power_limit_w:
        raise ConfigError(f"{where}: min_power_limit_w > max_power_limit_w")
    return limits


def _node_policy(raw: Mapping[str, object], where: str) -> NodePolicyConfig:
    known = set(NodePolicyConfig.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid: {sorted(known)}")
    dirty_above = _required_positive(raw, "dirty_above_g_per_kwh", where)
    dirty_limit = _required_positive(raw, "dirty_power_limit_w", where)
    if ("trace" in raw) == ("provider" in raw):
        raise ConfigError(f"{where}: give exactly one of 'trace' (CSV path) or 'provider' (+ 'zone')")
    if "provider" in raw and "zone" not in raw:
        raise ConfigError(f"{where}: 'provider' needs 'zone'")
    interval_s = raw.get("interval_s", 300.0)
    if not _positive(interval_s) or interval_s < 1:
        raise ConfigError(f"{where}.interval_s: must be a number >= 1 and finite, got {interval_s!r}")
    trace = _optional_str(raw, "trace", where)
    options = _table(raw, "provider_options", where) if "provider_options" in raw else {}
    return NodePolicyConfig(
        dirty_above_g_per_kwh=dirty_above,
        dirty_power_limit_w=dirty_limit,
        trace=Path(trace) if trace is not None else None,
        provider=_optional_str(raw, "provider", where),
        zone=_optional_str(raw, "zone", where),
        provider_options=options,
        interval_s=interval_s,
    )


def _caps(daemon: Mapping[str, object], where: str, errors: list[str]) -> dict[str, float]:
    """The connection limits of [daemon]; a bad one is reported in ``errors`` and left at its default."""
    caps: dict[str, float] = {}
    for key, default, low in (("max_connections", 1024, 1), ("max_connections_per_uid", 256, 1),
                              ("idle_timeout_s", 600.0, 1)):
        value = daemon.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= 1_000_000:
            errors.append(f"{where}: daemon.{key} must be a number in [{low}, 1000000], got {value!r}")
            value = default
        caps[key] = value if key == "idle_timeout_s" else int(value)
    return caps


def parse_config(raw: Mapping[str, object], where: str = "daemon config") -> DaemonConfig:
    """Validate a parsed TOML document; one ConfigError listing every problem, one line each."""
    errors: list[str] = []

    def check(parse: Callable[[], T], default: T) -> T:
        # ``default`` only stands in until the errors are raised together below.
        try:
            return parse()
        except ConfigError as e:
            errors.append(str(e))
            return default

    unknown = set(raw) - {"daemon", "limits", "gpu", "node_policy", "gpu_access"}
    if unknown:
        errors.append(f"{where}: unknown table(s) {sorted(unknown)}; valid: daemon, limits, gpu, node_policy, gpu_access")
    daemon: dict[str, object] = check(lambda: _table(raw, "daemon", where), {})
    bad = set(daemon) - {"socket", "group", "socket_mode", "allowed_uids", "state_dir", "admin_uids",
                         "max_connections", "max_connections_per_uid", "idle_timeout_s"}
    if bad:
        errors.append(f"{where}: [daemon] unknown key(s) {sorted(bad)}")
    socket_mode = check(lambda: _socket_mode(daemon.get("socket_mode", "0660"), where), 0o660)
    uids: tuple[int, ...] = check(lambda: _uid_list(daemon, "allowed_uids", [], where), ())
    admins: tuple[int, ...] = check(lambda: _uid_list(daemon, "admin_uids", [0], where), (0,))
    caps = _caps(daemon, where, errors)
    socket = check(lambda: _path(daemon, "socket", DEFAULT_SOCKET, where), DEFAULT_SOCKET)
    group = check(lambda: _optional_str(daemon, "group", f"{where}: daemon"), None)
    state_dir = check(lambda: _path(daemon, "state_dir", Path("/var/lib/greentrain"), where), Path())
    access: dict[str, object] = check(lambda: _table(raw, "gpu_access", where), {})
    gpu_access: dict[str, tuple[str, ...]] = {}
    for user, allowed in access.items():
        if not isinstance(allowed, list) or not all(isinstance(g, str) and g.isprintable() for g in allowed):
            errors.append(f"{where}: gpu_access.{user} must be a list of GPU indices or UUIDs as strings")
        else:
            gpu_access[str(user)] = tuple(allowed)
    gpus: dict[str, object] = check(lambda: _table(raw, "gpu", where), {})
    limits = check(lambda: _limits(_table(raw, "limits", where), f"{where}: [limits]"), GPULimits())
    gpu_limits = {k: check(lambda: _limits(_table(gpus, k, where), f"{where}: [gpu.{k!r}]", limits.allow_clock_lock),
                           GPULimits()) for k in gpus}
    node_policy = (check(lambda: _node_policy(_table(raw, "node_policy", where), f"{where}: [node_policy]"), None)
                   if "node_policy" in raw else None)
    if errors:
        raise ConfigError("\n".join(errors))
    return DaemonConfig(
        admin_uids=admins,
        gpu_access=gpu_access,
        max_connections=int(caps["max_connections"]),
        max_connections_per_uid=int(caps["max_connections_per_uid"]),
        idle_timeout_s=float(caps["idle_timeout_s"]),
        socket=socket,
        group=group,
        socket_mode=socket_mode,
        allowed_uids=uids,
        state_dir=state_dir,
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


def _path(daemon: Mapping[str, object], key: str, default: Path, where: str) -> Path:
    value = daemon.get(key, default)
    if not isinstance(value, str | Path):
        raise ConfigError(f"{where}: daemon.{key} must be a path as a string, got {value!r}")
    return Path(value)


def _uid_list(daemon: Mapping[str, object], key: str, default: list[int], where: str) -> tuple[int, ...]:
    uids = daemon.get(key, default)
    if not isinstance(uids, list) or not all(isinstance(u, int) and not isinstance(u, bool) for u in uids):
        raise ConfigError(f"{where}: daemon.{key} must be a list of integers")
    return tuple(uids)


def load_config(path: str | Path) -> DaemonConfig:
    """Read and validate the TOML file at ``path``."""
    path = Path(path)
    return parse_config(load_toml(path, what="daemon config"), str(path))
