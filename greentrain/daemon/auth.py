"""Who is on the other end of the socket: SO_PEERCRED plus the peer's groups.

Two fences: the socket file's owner group and mode (the kernel refuses
``connect`` to anyone else), and a check of the peer's kernel-reported
credentials on every connection (root, an allowed uid, or a member of the
configured group — supplementary groups read from ``/proc/<pid>/status``).
"""

from __future__ import annotations

import grp
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from greentrain.daemon.config import DaemonConfig
from greentrain.errors import ConfigError

__all__ = ["PeerCredentials", "peer_credentials", "peer_groups", "authorize", "prepare_socket_file"]


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    """Kernel-verified identity of a connected process."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """SO_PEERCRED of a connected Unix socket (Linux)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return PeerCredentials(pid, uid, gid)


def peer_groups(cred: PeerCredentials) -> set[int]:
    """Primary plus supplementary groups of the peer process (empty if it already exited)."""
    groups = {cred.gid}
    try:
        for line in Path(f"/proc/{cred.pid}/status").read_text().splitlines():
            if line.startswith("Groups:"):
                groups.update(int(g) for g in line.split()[1:])
    except (OSError, ValueError):
        pass
    return groups


def authorize(cred: PeerCredentials, config: DaemonConfig) -> str | None:
    """None if allowed, else the reason (sent back to the client)."""
    if cred.uid == 0 or cred.uid == os.geteuid() or cred.uid in config.allowed_uids:
        return None
    if config.group is not None:
        try:
            gid = grp.getgrnam(config.group).gr_gid
        except KeyError:
            return f"daemon group {config.group!r} does not exist"
        if gid in peer_groups(cred):
            return None
        return f"uid {cred.uid} is not in group {config.group!r}; fix: sudo usermod -aG {config.group} <user>"
    return f"uid {cred.uid} is not allowed; add it to daemon.allowed_uids or set daemon.group"


def prepare_socket_file(config: DaemonConfig) -> None:
    """Give the bound socket its group and mode (the first fence)."""
    path = config.socket
    gid = -1
    if config.group is not None:
        try:
            gid = grp.getgrnam(config.group).gr_gid
        except KeyError:
            raise ConfigError(f"daemon.group: group {config.group!r} does not exist; create it (groupadd)") from None
    mode = config.mode() if config.group is not None else config.mode() & 0o700
    try:
        os.chown(path, -1, gid)
        os.chmod(path, mode)
    except OSError as e:
        raise ConfigError(f"daemon.socket {path}: cannot set owner/mode ({e.strerror})") from None
