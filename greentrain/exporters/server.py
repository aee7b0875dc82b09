"""The pull endpoint (``--metrics-port``) and its optional Pushgateway push.

``MetricsServer`` serves ``/metrics`` from a daemon thread. The rendered page
is cached for ``cache_s`` and rendered by one thread at a time, so a hundred
scrapers cost one render, and the training thread never waits on a scrape.
It binds 127.0.0.1 by default; any other address needs ``allow_public=True``
(``--metrics-allow-public``) and logs a warning.

In a multi-rank job pass ``multiprocess_dir``: local rank 0 serves one node
endpoint that aggregates every local rank (see ``multiproc.py``); the other
ranks only write their samples there.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from greentrain.jobstats import JobStats
    from greentrain.monitor import Monitor
    from greentrain.signals.chain import SignalChain
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from greentrain.clock import Clock, SystemClock
from greentrain.errors import ConfigError
from greentrain.exporters.collector import GreentrainCollector
from greentrain.exporters.multiproc import NodeCollector, RankFiles, RankWriter
from greentrain.exporters.push import Pusher, PushgatewayConfig

__all__ = ["MetricsServer", "is_loopback"]

log = logging.getLogger(__name__)

StartResponse = Callable[[str, list[tuple[str, str]]], object]


def is_loopback(addr: str) -> bool:
    """True for 'localhost' and loopback IPs (127.0.0.0/8, ::1); '' and 0.0.0.0 are not."""
    if addr.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(addr.strip("[]")).is_loopback
    except ValueError:
        return False


class _SilentHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Scrapes are not worth a log line each."""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 256  # listen backlog: a fleet of scrapers connecting at once must not be refused


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class _CachedExposition:
    """WSGI app: the registry rendered at most once per ``cache_s``, by one thread at a time."""

    def __init__(self, registry: CollectorRegistry, cache_s: float) -> None:
        self._registry, self._cache_s = registry, cache_s
        self._lock = threading.Lock()
        self._body = b""
        self._rendered_at = float("-inf")

    def render(self) -> bytes:
        with self._lock:
            if time.monotonic() - self._rendered_at >= self._cache_s:
                self._body = generate_latest(self._registry)
                self._rendered_at = time.monotonic()
            return self._body

    def __call__(self, environ: dict[str, object], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found; metrics are at /metrics\n"]
        body = self.render()
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
        return [body]


class MetricsServer:
    """Prometheus endpoint for one job (or, with no ``job_stats``, one node).

    ``start()`` binds (``port=0``: an ephemeral port, then in ``.port``);
    ``stop()`` pushes the final state to the Pushgateway (or deletes the group)
    and closes the socket. Usable as a context manager.
    """

    def __init__(self, *, job: str, monitor: Monitor | None = None, signals: SignalChain | None = None,
                 job_stats: JobStats | None = None,
                 addr: str = "127.0.0.1", port: int = 0, registry: CollectorRegistry | None = None,
                 allow_public: bool = False, pushgateway: str | PushgatewayConfig | None = None,
                 clock: Clock | None = None, multiprocess_dir: str | os.PathLike[str] | None = None,
                 cache_s: float = 0.5) -> None:
        _validate(job, addr, port, allow_public)
        self.job, self.addr, self.port = job, addr, port
        self.registry = registry if registry is not None else CollectorRegistry()
        self.collector = GreentrainCollector(job=job, monitor=monitor, signals=signals, job_stats=job_stats,
                                             clock=clock or SystemClock())
        self.local_rank = _local_rank() if multiprocess_dir is not None else 0
        self._writer: RankWriter | None = None
        if multiprocess_dir is not None:
            files = RankFiles(multiprocess_dir, job=job, run_id=os.environ.get("TORCHELASTIC_RUN_ID", ""))
            if self.local_rank == 0:
                self.registry.register(NodeCollector(self.collector.samples, files))
            else:
                self._writer = RankWriter(files, self.local_rank, self.collector.samples)
        else:
            self.registry.register(self.collector)
        if isinstance(pushgateway, str):
            pushgateway = PushgatewayConfig(url=pushgateway)
        self._pusher = Pusher(pushgateway, job=job, registry=self.registry) \
            if pushgateway is not None and self.local_rank == 0 else None
        self._app = _CachedExposition(self.registry, cache_s)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._started = self._stopped = False

    @property
    def pusher(self) -> Pusher | None:
        """The Pushgateway pusher (None without ``pushgateway=``, and on non-leader ranks)."""
        return self._pusher

    @property
    def serving(self) -> bool:
        """Whether this process serves HTTP (False on non-leader ranks)."""
        return self._writer is None

    @property
    def url(self) -> str:
        """The scrape URL (after ``start()``)."""
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> MetricsServer:
        """Bind and serve in a daemon thread; start pushing if configured."""
        if self._started:
            return self
        self._started = True
        if self._writer is not None:
            self._writer.start()
            return self
        server_class = _ThreadingServer6 if ":" in self.addr else _ThreadingServer
        try:
            self._server = make_server(self.addr, self.port, self._app, server_class, _SilentHandler)
        except OSError as e:
            self._started = False
            # Named both ways: the setting reaches here from a flag (run, demo) or a keyword (Session).
            if isinstance(e, socket.gaierror) or e.errno == errno.EADDRNOTAVAIL:  # the address, not the port
                raise ConfigError(f"--metrics-addr / metrics_addr {self.addr!r}: not an address of this machine "
                                  f"({e.strerror}); give one of its IP addresses, e.g. 127.0.0.1") from None
            raise ConfigError(f"--metrics-port / metrics_port {self.port}: cannot bind {self.addr}:{self.port} "
                              f"({e.strerror}); choose another port, or 0 for any free one") from None
        self.port = self._server.server_port
        if not is_loopback(self.addr):
            log.warning("metrics endpoint listens on %s:%d and is reachable from the network", self.addr, self.port)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.5},
                                        name="greentrain-metrics", daemon=True)
        self._thread.start()
        if self._pusher is not None:
            self._pusher.start()
        return self

    def render(self) -> bytes:
        """The exposition text a scrape would get now (uncached)."""
        return generate_latest(self.registry)

    def stop(self) -> None:
        """Final push (or group delete), then close the socket. Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        if not self._started or (self._writer is None and self._server is None):  # never started, or bind failed
            self.collector.close()
            return
        self.collector.finished_at_s = self.collector.clock.now().timestamp()
        if self._writer is not None:
            self._writer.stop()
        if self._pusher is not None:
            self._pusher.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.collector.close()

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _validate(job: str, addr: str, port: int, allow_public: bool) -> None:
    if not isinstance(job, str) or not job.strip():
        raise ConfigError("job: the metrics job label must be a non-empty string (e.g. --job llm-7b)")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ConfigError(f"--metrics-port: {port!r} is not a port number 0-65535 (0 picks a free port)")
    if not is_loopback(addr) and not allow_public:
        raise ConfigError(f"--metrics-addr {addr or '(all interfaces)'}: not a loopback address, so anyone on the "
                          "network could read these metrics; pass --metrics-allow-public to bind it anyway")


def _local_rank() -> int:
    """This process's rank on its node, as torchrun (and every launcher after it) says."""
    text = os.environ.get("LOCAL_RANK", "0")
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"LOCAL_RANK={text!r} is not an integer") from None
