"""Push to a Prometheus Pushgateway, for batch jobs too short or too hidden to scrape.

The group is keyed by ``job`` and ``instance`` (the host by default). A daemon
thread pushes every ``interval_s``; at exit the last push carries
``greentrain_job_finished_timestamp_seconds`` so dashboards see the job ended,
and with ``delete_on_exit`` the group is removed instead. Push failures are
logged (without the URL's credentials) and never raised into training.
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from prometheus_client import delete_from_gateway, push_to_gateway
from prometheus_client.registry import CollectorRegistry

from greentrain.errors import ConfigError

__all__ = ["Pusher", "PushgatewayConfig"]

log = logging.getLogger(__name__)


@dataclass(kw_only=True, slots=True)
class PushgatewayConfig:
    """Where and how often to push."""

    url: str
    """Pushgateway base URL, e.g. 'http://127.0.0.1:9091'."""
    interval_s: float = 15.0
    """Seconds between pushes while the job runs."""
    instance: str | None = None
    """``instance`` grouping label; default: this host's name."""
    delete_on_exit: bool = False
    """Delete the group at exit instead of leaving the final (finished) state."""
    timeout_s: float = 5.0
    """Per-request timeout, seconds."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--pushgateway: {self.safe_url()!r} is not an http(s)://host:port URL")
        if self.interval_s <= 0:
            raise ConfigError(f"pushgateway interval_s: must be > 0, got {self.interval_s}")
        if self.timeout_s <= 0:
            raise ConfigError(f"pushgateway timeout_s: must be > 0, got {self.timeout_s}")

    def safe_url(self) -> str:
        """The URL without user:password, for messages."""
        parts = urlsplit(self.url)
        if parts.hostname is None:
            return "<invalid URL>"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"


class Pusher:
    """Pushes one registry to one Pushgateway group on a schedule, and once more at stop."""

    def __init__(self, config: PushgatewayConfig, *, job: str, registry: CollectorRegistry) -> None:
        self.config = config
        self.job = job
        self.grouping_key = {"instance": config.instance or socket.gethostname()}
        self._registry = registry
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="greentrain-pushgateway", daemon=True)
        self.pushes_ok = 0
        self.pushes_failed = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the schedule, push the final state, then delete the group if configured."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.config.timeout_s * 2 + 1)
        self.push()
        if self.config.delete_on_exit:
            self.delete()

    def push(self) -> bool:
        """Replace the group with the registry's current samples; False (logged) on failure."""
        try:
            push_to_gateway(self.config.url, job=self.job, registry=self._registry,
                            grouping_key=self.grouping_key, timeout=self.config.timeout_s)
        except Exception as e:
            self.pushes_failed += 1
            log.warning("pushgateway %s: push failed (%s)", self.config.safe_url(), type(e).__name__)
            return False
        self.pushes_ok += 1
        return True

    def delete(self) -> bool:
        """Delete the group; False (logged) on failure."""
        try:
            delete_from_gateway(self.config.url, job=self.job, grouping_key=self.grouping_key,
                                timeout=self.config.timeout_s)
        except Exception as e:
            log.warning("pushgateway %s: delete failed (%s)", self.config.safe_url(), type(e).__name__)
            return False
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.config.interval_s):
            self.push()
