"""Helpers for the exporter tests: monitor/signal doubles and real Prometheus/Pushgateway processes.

The signal double replays a real Electricity Maps trace through the
cache-only ``peek`` API a SignalChain offers. Servers are started on
ephemeral 127.0.0.1 ports with temp dirs and stopped by pid.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from greentrain.clock import Clock
from greentrain.signals.base import IntensityPoint, Kind, ProviderStatus
from greentrain.signals.trace import load_trace
from tests.ranks import free_port

REPO = Path(__file__).resolve().parents[2]
RULES = sorted((REPO / "exporters" / "rules").glob("*.yml"))
DCGM_UUIDS = ("GPU-d7cbb0cd-d4bd-c2f7-dfaf-221df5e958ea", "GPU-c0b5694b-2b5d-6b20-f903-558341437f6b")


class TraceSignals:
    """SignalChain double over a real trace: cache-only ``peek`` API, settable staleness."""

    def __init__(self, trace_csv: Path, clock: Clock, *, stale: bool = False, age_s: float = 120.0) -> None:
        self.points = load_trace(trace_csv)
        self.clock, self.stale, self.age_s = clock, stale, age_s
        self.network_calls = 0

    def _index(self) -> int:
        now = self.clock.now()
        return next(i for i, p in enumerate(self.points) if p.start <= now < p.end)

    def peek(self) -> IntensityPoint:
        return self.points[self._index()]

    def peek_forecast(self) -> list[IntensityPoint]:
        i = self._index()
        return [_as_forecast(p) for p in self.points[i:i + 24]]

    def status(self) -> ProviderStatus:
        return ProviderStatus(provider="csv", zone=self.points[0].zone, age_s=self.age_s, stale=self.stale)

    def latest(self) -> IntensityPoint:  # would be network I/O in a real chain: must not be called on scrape
        self.network_calls += 1
        return self.peek()


def _as_forecast(p: IntensityPoint) -> IntensityPoint:
    # A forecast 10 % off the actual, as day-ahead forecasts typically are.
    return IntensityPoint(start=p.start, end=p.end, intensity_g_per_kwh=p.intensity_g_per_kwh * 1.1,
                          kind=Kind.FORECAST, provider=p.provider, zone=p.zone)


def wait_http(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not ready after {timeout_s} s")
        time.sleep(0.1)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5.0) as r:
        return json.loads(r.read())


def http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5.0) as r:
        return r.read().decode()


class Process:
    """A server process we started, stopped by its pid."""

    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()


def _ready_or_stop(process: Process, url: str) -> None:
    try:
        wait_http(url + "/-/ready")
    except BaseException:
        process.stop()
        raise AssertionError(f"{url} did not become ready:\n{process.log_path.read_text()[-2000:]}") from None


class Prometheus:
    """A real Prometheus on 127.0.0.1 with a temp config and storage, 1 s scrape and rule evaluation."""

    def __init__(self, tmp: Path, scrape_configs: list[dict[str, Any]]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
                  "rule_files": [str(p) for p in RULES], "scrape_configs": scrape_configs}
        (tmp / "prometheus.yml").write_text(json.dumps(config))  # JSON is valid YAML
        self.process = Process(["/usr/bin/prometheus", f"--config.file={tmp / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                                "--storage.tsdb.retention.time=1h", "--log.level=warn"], tmp / "prometheus.log")
        _ready_or_stop(self.process, self.url)

    def query(self, expr: str) -> list[dict[str, Any]]:
        body = get_json(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, expr: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(expr)
            if result:
                return result
            if time.monotonic() > deadline:
                raise TimeoutError(f"no data for {expr!r} after {timeout_s} s")
            time.sleep(0.25)


class Pushgateway:
    """A real Pushgateway on 127.0.0.1, persisting only into the test's temp dir."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # Debian's build persists to /var/lib/prometheus by default: keep ours in the temp dir.
        self.process = Process(["/usr/bin/prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{self.port}",
                                f"--persistence.file={tmp / 'pushgateway.data'}", "--log.level=warn"],
                               tmp / "pushgateway.log")
        _ready_or_stop(self.process, self.url)


class StaticText:
    """Serves one text file at /metrics (the recorded dcgm-exporter sample)."""

    def __init__(self, text: str) -> None:
        body = text.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def deadline_from(now: datetime, hours: float) -> datetime:
    return now + timedelta(hours=hours)
