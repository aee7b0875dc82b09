"""``greentrain daemon``: a privileged helper that owns GPU knobs for unprivileged training jobs.

Server (``server.DaemonServer``), client (``client.DaemonClient``), wire
protocol, TOML config and the node-wide policy. Import the submodules you
need; this package imports nothing heavy.
"""

__all__ = ["auth", "client", "config", "nodepolicy", "protocol", "server"]
