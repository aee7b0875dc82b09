"""MetricsServer: binding rules, lifecycle, caching, concurrent scrapes."""

from __future__ import annotations

import logging
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from greentrain.errors import ConfigError
from greentrain.exporters import MetricsServer
from greentrain.exporters.server import is_loopback
from greentrain.jobstats import JobStats

pytestmark = pytest.mark.timeout(30)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def test_default_bind_is_loopback_on_an_ephemeral_port() -> None:
    with MetricsServer(job="j", job_stats=JobStats(job="j")) as server:
        assert server.addr == "127.0.0.1" and server.port > 0
        assert "greentrain_training_steps_total" in _get(server.url)
        with pytest.raises(urllib.error.HTTPError) as info:
            _get(server.url.replace("/metrics", "/other"))
        assert info.value.code == 404


@pytest.mark.parametrize("addr", ["0.0.0.0", "", "::", "10.1.2.3", "example.org"])
def test_public_address_needs_the_explicit_flag(addr: str) -> None:
    with pytest.raises(ConfigError, match="--metrics-addr .*--metrics-allow-public"):
        MetricsServer(job="j", addr=addr)


def test_public_bind_with_flag_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="greentrain.exporters.server"):
        with MetricsServer(job="j", job_stats=JobStats(job="j"), addr="0.0.0.0", allow_public=True) as server:
            assert "greentrain_job_state" in _get(f"http://127.0.0.1:{server.port}/metrics")
    assert any("reachable from the network" in r.getMessage() for r in caplog.records)


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.5.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.0.1") and not is_loopback("")


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"--metrics-port / metrics_port {port}: cannot bind"):
            MetricsServer(job="j", port=port).start()


@pytest.mark.parametrize("addr", ["not-an-address", "192.0.2.55"])  # no such name; TEST-NET-1, on no machine
def test_an_address_that_cannot_be_bound_is_blamed_on_the_address_not_the_port(addr: str) -> None:
    with pytest.raises(ConfigError, match=f"--metrics-addr / metrics_addr '{addr}': not an address of this machine"):
        MetricsServer(job="j", addr=addr, port=0, allow_public=True).start()


@pytest.mark.parametrize(("kwargs", "match"), [({"port": 70000}, "--metrics-port"), ({"port": -1}, "--metrics-port"),
                                               ({"job": " "}, "job")])
def test_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        MetricsServer(**{"job": "j", **kwargs})


def test_stop_is_idempotent_and_frees_the_port() -> None:
    server = MetricsServer(job="j").start()
    port = server.port
    server.stop()
    server.stop()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_concurrent_scrapes_all_succeed_and_render_once_per_cache_window() -> None:
    renders = []

    class Counting:
        def snapshot(self) -> JobStats:
            renders.append(1)
            return JobStats(job="j")

    with MetricsServer(job="j", job_stats=Counting(), cache_s=60.0) as server:
        with ThreadPoolExecutor(max_workers=32) as pool:
            bodies = list(pool.map(lambda _: _get(server.url), range(64)))
    assert all("greentrain_job_state" in b for b in bodies)
    assert len(renders) == 1


def test_scrape_reads_fresh_values_after_the_cache_window() -> None:
    stats = JobStats(job="j")
    with MetricsServer(job="j", job_stats=stats, cache_s=0.0) as server:
        stats.add(steps=3)
        assert 'greentrain_training_steps_total{job="j"} 3.0' in _get(server.url)
        stats.add(steps=2)
        assert 'greentrain_training_steps_total{job="j"} 5.0' in _get(server.url)


def test_stop_without_start_is_harmless(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    MetricsServer(job="j").stop()
    monkeypatch.setenv("LOCAL_RANK", "2")
    MetricsServer(job="j", multiprocess_dir=tmp_path).stop()
    server = MetricsServer(job="j")
    assert server.start() is server.start()  # starting twice binds once
    server.stop()
