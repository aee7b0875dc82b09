"""Every live provider against a hostile server: each call ends as SignalError, the CLI as one line, exit 2.

Scenarios (tests/signals/gt_hostile_server.py): nested JSON (also in an
error body and inside a valid shape), 400-digit numbers, 1e999, years 0001
and 9999, redirects carrying valid JSON, a gzip bomb, a corrupt gzip, a body
over the cap, a lying Content-Length, an unknown encoding, and bodies,
headers and error bodies trickled a byte at a time.
"""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime, timedelta

import pytest

from greentrain.cli import main
from greentrain.clock import FrozenClock
from greentrain.errors import SignalError
from greentrain.signals import make_provider
from greentrain.signals.transport.body import MAX_BODY_BYTES
from tests.signals.gt_hostile_server import PROVIDER_ZONES, SCENARIOS, HostileServer

NOW = datetime(2026, 11, 23, 10, 5, tzinfo=UTC)
DEADLINE_S = 0.5
CREDENTIALS = {
    "ELECTRICITYMAPS_TOKEN": "em-canary-token-Zq81",
    "WATTTIME_USER": "alice",
    "WATTTIME_PASSWORD": "wt-canary-pass-Kx93",
}


@pytest.fixture(autouse=True)
def _credentials(monkeypatch):
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


def _provider(name: str, url: str):
    return make_provider(name, clock=FrozenClock(NOW), api_base=url, timeout_s=DEADLINE_S)


def _calls(provider, zone):
    return {
        "latest": lambda: provider.latest(zone),
        "forecast": lambda: provider.forecast(zone, 24.0),
        "history": lambda: provider.history(zone, NOW - timedelta(hours=3), NOW),
    }


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("name", sorted(PROVIDER_ZONES))
def test_every_call_ends_as_signal_error(name, scenario):
    zone = PROVIDER_ZONES[name]
    with HostileServer(name, scenario) as server:
        provider = _provider(name, server.url)
        try:
            for what, call in _calls(provider, zone).items():
                with pytest.raises(SignalError) as info:
                    call()
                message = str(info.value)
                assert name in message and "\n" not in message, (what, message)
        finally:
            provider.close()
    if scenario.startswith("drip"):
        # The trickle would take 20 s per request; the client hung up at its deadline, long before the end.
        data = [e for e in server.exchanges if not e.path.endswith("/login")]
        assert data and all(e.sent_bytes < 300 for e in data), [e.sent_bytes for e in data]


@pytest.mark.parametrize("scenario", ["nested-json", "huge-int", "redirect-302", "drip-body"])
def test_hostile_watttime_login_is_a_signal_error_too(scenario):
    with HostileServer("watttime", scenario, login_ok=False) as server:
        provider = _provider("watttime", server.url)
        with pytest.raises(SignalError):
            provider.latest(PROVIDER_ZONES["watttime"])
        provider.close()


def test_gzip_bomb_stops_at_the_cap_not_in_memory():
    """32 MiB inflated from ~32 KiB on the wire: the client stops at the 4 MiB cap."""
    with HostileServer("ukgrid", "gzip-bomb") as server:
        provider = _provider("ukgrid", server.url)
        tracemalloc.start()
        try:
            with pytest.raises(SignalError, match="larger than"):
                provider.latest("GB")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            provider.close()
    assert peak < 4 * MAX_BODY_BYTES, peak  # without the cap the 32 MiB body alone would be held


def test_redirect_body_is_never_read_as_data():
    with HostileServer("electricitymaps", "redirect-302") as server:
        provider = _provider("electricitymaps", server.url)
        with pytest.raises(SignalError, match="HTTP 302 redirect"):
            provider.latest("GB")
        provider.close()
    assert len(server.exchanges) == 1  # not followed


@pytest.mark.parametrize("scenario", ["nested-json", "huge-int", "year-9999", "redirect-302", "gzip-bomb",
                                      "drip-body", "drip-headers"])
@pytest.mark.parametrize("name", sorted(PROVIDER_ZONES))
def test_cli_prints_one_line_and_exits_2(name, scenario, capsys):
    with HostileServer(name, scenario) as server:
        with pytest.raises(SystemExit) as info:
            main(["carbon", "now", "--zone", PROVIDER_ZONES[name], "--provider", name, "--api-base", server.url,
                  "--timeout", str(DEADLINE_S)])
    out, err = capsys.readouterr()
    assert info.value.code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("greentrain: error: "), err
    assert "Traceback" not in err
