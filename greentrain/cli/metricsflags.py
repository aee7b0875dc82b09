"""Click options for commands that serve metrics (``monitor``, ``run``, ``train``, ``exporter``).

Use ``@metrics_options()`` on a command, then ``metrics_server_from_options(...)``
with the parsed values: every command spells the flags the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click

from greentrain.exporters.push import PushgatewayConfig
from greentrain.exporters.server import MetricsServer

if TYPE_CHECKING:
    from greentrain.clock import Clock
    from greentrain.jobstats import JobStats
    from greentrain.monitor import Monitor
    from greentrain.signals.chain import SignalChain

__all__ = ["metrics_options", "metrics_server_from_options"]

F = TypeVar("F", bound=Callable[..., object])


def metrics_options(port_default: int | None = None) -> Callable[[F], F]:
    """Add --metrics-port, --metrics-addr, --metrics-allow-public and --pushgateway; ``port_default``: the port
    served when --metrics-port is not given (None: no endpoint then)."""
    port_help = ("Serve Prometheus metrics on this port (0: any free port)."
                 + (" Off when not given." if port_default is None else ""))
    options = [
        click.option("--metrics-port", type=click.IntRange(0, 65535), default=port_default,
                     show_default=port_default is not None, help=port_help),
        click.option("--metrics-addr", default="127.0.0.1", show_default=True,
                     help="Address for the metrics endpoint; non-loopback needs --metrics-allow-public."),
        click.option("--metrics-allow-public", is_flag=True, default=False,
                     help="Allow binding --metrics-addr to a non-loopback address (logs a warning)."),
        click.option("--pushgateway", default=None, metavar="URL",
                     help="Also push metrics to this Pushgateway (grouped by job and instance)."),
    ]

    def decorate(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def metrics_server_from_options(*, job: str, metrics_port: int | None, metrics_addr: str,
                                metrics_allow_public: bool, pushgateway: str | None,
                                monitor: Monitor | None = None, signals: SignalChain | None = None,
                                job_stats: JobStats | None = None, clock: Clock | None = None,
                                multiprocess_dir: str | os.PathLike[str] | None = None) -> MetricsServer | None:
    """A (not yet started) MetricsServer, or None when neither a port nor a Pushgateway was asked for.

    ``monitor``, ``signals``, ``job_stats``, ``clock`` and ``multiprocess_dir`` are passed on.
    """
    if metrics_port is None and pushgateway is None:
        return None
    push = PushgatewayConfig(url=pushgateway) if pushgateway else None
    return MetricsServer(job=job, addr=metrics_addr, port=metrics_port or 0, allow_public=metrics_allow_public,
                         pushgateway=push, monitor=monitor, signals=signals, job_stats=job_stats, clock=clock,
                         multiprocess_dir=multiprocess_dir)
