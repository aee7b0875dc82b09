"""Reflected-credentials canary: a server echoes every header and query back, on every error path.

For each live provider and each answer (200 with the credentials spliced
into the data, 302, 400, 401, 403, 404, 429, 500, a connection refused), the
text that reaches a user is collected: exception messages (str and repr),
the chain's status and log lines, the engine's notes and JSONL event log,
the Prometheus exposition and the CLI's output. None may contain any run of
6 characters of a secret in any form (raw, URL-encoded, base64, the base64
``user:password`` of a Basic header).
"""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, quote_plus

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from greentrain.cli import main
from greentrain.clock import FrozenClock
from greentrain.engine import Collaborators, Progress
from greentrain.engine import Engine
from greentrain.errors import SignalError
from greentrain.events import EventLog
from greentrain.exporters.collector import GreentrainCollector
from greentrain.signals import SignalChain, make_provider
from greentrain.signals.transport.redact import FRAGMENT_CHARS
from tests.engine.gt_engine_doubles import RunNowPolicy
from tests.signals.gt_hostile_server import PROVIDER_ZONES, HostileServer, echo_credentials

NOW = datetime(2026, 11, 23, 10, 5, tzinfo=UTC)
USER = "alice"
SECRETS = {"ELECTRICITYMAPS_TOKEN": "em-canary-token-Zq81xPq7", "WATTTIME_PASSWORD": "wt-canary-pass-Kx93vB2m"}
BEARER = "wt-bearer-token-0123456789"  # what the hostile server's /login hands out
STATUSES = [200, 302, 400, 401, 403, 404, 429, 500]


def _forms(secret: str, partner: str | None = None) -> list[str]:
    forms = [secret, quote(secret, safe=""), quote_plus(secret), base64.b64encode(secret.encode()).decode()]
    if partner is not None:
        forms.append(base64.b64encode(f"{partner}:{secret}".encode()).decode())
    return forms


FRAGMENTS = sorted({form[i : i + FRAGMENT_CHARS]
                    for form in _forms(SECRETS["ELECTRICITYMAPS_TOKEN"]) + _forms(SECRETS["WATTTIME_PASSWORD"], USER)
                    + _forms(BEARER)
                    for i in range(len(form) - FRAGMENT_CHARS + 1)})


def _leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


@pytest.fixture(autouse=True)
def _credentials(monkeypatch):
    monkeypatch.setenv("WATTTIME_USER", USER)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def _collect_provider_texts(name: str, url: str, tmp_path, caplog) -> list[str]:
    zone = PROVIDER_ZONES[name]
    texts: list[str] = []
    provider = make_provider(name, clock=FrozenClock(NOW), api_base=url, timeout_s=2.0)
    calls = [lambda: provider.latest(zone), lambda: provider.forecast(zone, 24.0),
             lambda: provider.history(zone, NOW - timedelta(hours=3), NOW)]
    if name == "watttime":
        calls.append(lambda: provider.signal_index(zone))
    for call in calls:
        try:
            call()
        except SignalError as e:
            texts += [str(e), repr(e), str(e.args)]
    chain = SignalChain([provider], zone=zone, clock=FrozenClock(NOW), backoff_base_s=0.0)
    with caplog.at_level(logging.DEBUG):
        try:
            chain.latest()
        except SignalError as e:
            texts.append(str(e))
        chain.forecast(24)
        texts.append(repr(chain.status()))
        registry = CollectorRegistry()
        registry.register(GreentrainCollector(job="canary", signals=chain, clock=FrozenClock(NOW)))
        texts.append(generate_latest(registry).decode())
        log_path = tmp_path / f"{name}.jsonl"
        engine = Engine(RunNowPolicy(),
                        Collaborators(clock=FrozenClock(NOW), signals=chain, event_log=EventLog(log_path)),
                        progress=Progress(steps_total=2, step_time_s=1.0),
                        countdown=False)
        engine.signals.fetch_budget_s = 5.0  # let the background fetch finish: its error text is what we check
        engine.begin()
        engine.step_begin()
        engine.step_end(tokens=1)
        engine.close()
        texts += list(engine.notes) + [log_path.read_text()]
    texts.append(caplog.text)
    chain.close()
    return texts


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("name", sorted(PROVIDER_ZONES))
def test_no_secret_fragment_anywhere(name, status, tmp_path, caplog, capsys):
    with HostileServer(name, writer=echo_credentials(status)) as server:
        texts = _collect_provider_texts(name, server.url, tmp_path, caplog)
        with pytest.raises(SystemExit):
            main(["carbon", "now", "--zone", PROVIDER_ZONES[name], "--provider", name, "--api-base", server.url])
    texts += list(capsys.readouterr())
    sent = [e for e in server.exchanges if e.headers.get("authorization") or e.headers.get("auth-token")]
    if name != "ukgrid":  # the canary is real: credentials were sent and echoed
        assert sent, "no request carried credentials"
    leaks = {f for text in texts for f in _leaks(text)}
    assert not leaks, (leaks, [t for t in texts if _leaks(t)][:3])


def test_watttime_login_reflecting_basic_header(tmp_path, caplog):
    """The login itself answers 401 with the Basic header echoed (base64 of user:password)."""
    with HostileServer("watttime", writer=echo_credentials(401), login_ok=False) as server:
        texts = _collect_provider_texts("watttime", server.url, tmp_path, caplog)
    basic = base64.b64encode(f"{USER}:{SECRETS['WATTTIME_PASSWORD']}".encode()).decode()
    assert any("authorization" in e.headers and basic in e.headers["authorization"] for e in server.exchanges)
    assert not {f for text in texts for f in _leaks(text)}


def test_connection_refused_path(tmp_path, caplog):
    texts = _collect_provider_texts("electricitymaps", "http://127.0.0.1:9", tmp_path, caplog)
    assert any("cannot connect" in t for t in texts)
    assert not {f for text in texts for f in _leaks(text)}


def test_truncated_echo_is_masked_before_it_is_cut():
    """An error text cut at 200 characters used to keep the part of the token before the cut."""
    token = SECRETS["ELECTRICITYMAPS_TOKEN"]

    def write(conn):
        message = "x" * (200 - len(token) // 2) + token
        conn.respond(500, ('{"message": "%s"}' % message).encode())

    with HostileServer("electricitymaps", writer=write) as server:
        provider = make_provider("electricitymaps", api_base=server.url, timeout_s=2.0)
        with pytest.raises(SignalError) as info:
            provider.latest("GB")
        provider.close()
    assert not _leaks(str(info.value)), str(info.value)
