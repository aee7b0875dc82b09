"""Electricity Maps v3 client (real httpx code) against a local server serving recorded bodies."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from gt_signal_server import Reply, SignalServer, recorded

from greentrain.clock import FrozenClock
from greentrain.errors import AuthError, RateLimitedError, SignalError
from greentrain.signals import SignalChain, make_provider
from greentrain.signals.base import EmissionFactor, Kind

pytestmark = pytest.mark.timeout(60)

TOKEN = "em-test-token-4f9a2c"


@pytest.fixture
def server():
    with SignalServer() as s:
        yield s


@pytest.fixture
def at(server, monkeypatch):
    """``at(when)``: an Electricity Maps client on a clock frozen at ``when``, talking to the local server."""
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", TOKEN)
    made = []

    def build(when: datetime):
        made.append(make_provider("electricitymaps", clock=FrozenClock(when), api_base=server.url, timeout_s=2.0))
        return made[-1]

    yield build
    for provider in made:
        provider.close()


@pytest.fixture
def em(at):
    return at(datetime(2024, 3, 6, 19, 20, tzinfo=UTC))


def test_latest_sends_token_and_never_lets_the_api_guess_location(server, em):
    server.route("/carbon-intensity/latest", Reply(body=recorded("electricitymaps_v3_carbon-intensity_latest.json")))
    point = em.latest("US-CAR-DUK")
    assert point.intensity_g_per_kwh == 216 and point.kind == Kind.ACTUAL
    assert point.start == datetime(2024, 3, 6, 19, tzinfo=UTC) and point.end - point.start == timedelta(hours=1)
    assert point.emission_factor == EmissionFactor.LIFECYCLE and point.estimated is True
    assert (point.provider, point.zone) == ("electricitymaps", "US-CAR-DUK")
    (request,) = server.hits("/carbon-intensity/latest")
    assert request.headers["auth-token"] == TOKEN
    assert request.query["zone"] == ["US-CAR-DUK"]
    assert request.query["disableCallerLookup"] == ["true"]
    assert request.query["emissionFactorType"] == ["direct"]


def test_history_and_past_range(server, at):
    server.route("/carbon-intensity/history", Reply(body=recorded("electricitymaps_v3_carbon-intensity_history.json")))
    clock_now = datetime(2024, 3, 6, 20, tzinfo=UTC)
    em = at(clock_now)  # the history endpoint answers the last 24 h
    points = em.history("DE", clock_now - timedelta(hours=24), clock_now)
    assert len(points) == 24 and points[0].intensity_g_per_kwh == 599
    assert all(a.start < b.start for a, b in zip(points, points[1:], strict=False))
    server.route("/carbon-intensity/past-range",
                 Reply(body=recorded("electricitymaps_v3_carbon-intensity_past-range.json")))
    em = at(datetime(2024, 3, 25, tzinfo=UTC))  # a week ago: the past-range endpoint
    old = em.history("DK-DK2", datetime(2024, 3, 18, 2, tzinfo=UTC), datetime(2024, 3, 18, 4, tzinfo=UTC))
    assert [p.intensity_g_per_kwh for p in old] == [161, 167]
    (request,) = server.hits("/carbon-intensity/past-range")
    assert request.query["start"] == ["2024-03-18T02:00:00Z"]


def test_forecast_is_labelled_forecast(server, at):
    body = recorded("electricitymaps_v3_carbon-intensity_forecast.json")
    server.route("/carbon-intensity/forecast", Reply(body=body))
    em = at(datetime(2023, 6, 8, 12, 30, tzinfo=UTC))
    points = em.forecast("US-CAL-CISO", 72)
    assert [p.intensity_g_per_kwh for p in points] == [210, 153, 139]
    assert all(p.kind == Kind.FORECAST for p in points)


def test_null_intensity_is_a_signal_error(server, em):
    body = json.loads(recorded("electricitymaps_v3_carbon-intensity_latest.json"))
    body["carbonIntensity"] = None
    server.route("/carbon-intensity/latest", Reply(body=json.dumps(body).encode()))
    with pytest.raises(SignalError, match="null"):
        em.latest("US-CAR-DUK")


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_token_is_a_clear_auth_error_without_the_token(server, em, status):
    body = json.dumps({"message": f"Invalid token {TOKEN}"}).encode()  # a server echoing the token back
    server.route("/carbon-intensity/latest", Reply(status=status, body=body))
    with pytest.raises(AuthError) as info:
        em.latest("GB")
    assert str(status) in str(info.value) and TOKEN not in str(info.value)


def test_429_carries_retry_after(server, em):
    server.route("/carbon-intensity/latest", Reply(status=429, body=b'{"message":"slow down"}',
                                                   headers={"Retry-After": "120"}))
    with pytest.raises(RateLimitedError) as info:
        em.latest("GB")
    assert info.value.retry_after_s == 120


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=503, body=b"<html>down</html>"),
        Reply(body=b'{"zone": "GB", "carbonIntensity": 2'),  # truncated
        Reply(body=b"not json at all"),
        Reply(body=b'{"zone": "GB", "datetime": "2024-03-06T19:00:00.000Z"}'),  # missing field
        Reply(body=b'{"zone": "GB", "carbonIntensity": -5, "datetime": "2024-03-06T19:00:00.000Z"}'),
        Reply(body=b'{"zone": "GB", "carbonIntensity": 99999, "datetime": "2024-03-06T19:00:00.000Z"}'),
        Reply(body=b'{"zone": "FR", "carbonIntensity": 50, "datetime": "2024-03-06T19:00:00.000Z"}'),  # wrong zone
        Reply(body=b'{"zone": "GB", "carbonIntensity": 50, "datetime": "2024-03-06T19:00:00"}'),  # naive time
    ],
    ids=["5xx", "truncated", "non-json", "missing", "negative", "absurd", "wrong-zone", "naive-time"],
)
def test_bad_answers_are_signal_errors(server, em, reply):
    server.route("/carbon-intensity/latest", reply)
    with pytest.raises(SignalError):
        em.latest("GB")


def test_out_of_order_history_is_refused(server, at):
    body = json.loads(recorded("electricitymaps_v3_carbon-intensity_history.json"))
    body["history"][3], body["history"][4] = body["history"][4], body["history"][3]
    server.route("/carbon-intensity/history", Reply(body=json.dumps(body).encode()))
    em = at(datetime(2024, 3, 6, 20, tzinfo=UTC))
    with pytest.raises(SignalError, match="order"):
        em.history("DE", datetime(2024, 3, 6, 0, tzinfo=UTC), datetime(2024, 3, 6, 20, tzinfo=UTC))


def test_slow_response_times_out(server, monkeypatch):
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", TOKEN)
    server.route("/carbon-intensity/latest", Reply(body=b"{}", delay_s=1.5))
    em = make_provider("electricitymaps", api_base=server.url, timeout_s=0.3)
    with pytest.raises(SignalError, match="timed out"):
        em.latest("GB")
    em.close()


def test_no_token_is_not_configured_and_fails_without_network(server, monkeypatch):
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    em = make_provider("electricitymaps", api_base=server.url)
    assert not em.configured()
    with pytest.raises(AuthError, match="ELECTRICITYMAPS_TOKEN"):
        em.latest("GB")
    assert server.requests == []


def test_token_file(server, monkeypatch, tmp_path):
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    secret = tmp_path / "em.token"
    secret.write_text(TOKEN + "\n")
    server.route("/carbon-intensity/latest", Reply(body=recorded("electricitymaps_v3_carbon-intensity_latest.json")))
    em = make_provider("electricitymaps", api_base=server.url, token_file=secret)
    assert em.latest("US-CAR-DUK").intensity_g_per_kwh == 216
    assert server.hits("/carbon-intensity/latest")[0].headers["auth-token"] == TOKEN


def test_chain_falls_back_to_static_on_server_errors_and_recovers(server, at):
    clock = FrozenClock(datetime(2024, 3, 6, 19, 20, tzinfo=UTC))
    em = make_provider("electricitymaps", clock=clock, api_base=server.url)
    server.route("/carbon-intensity/latest", [Reply(status=500, body=b"{}"),
                                              Reply(body=recorded("electricitymaps_v3_carbon-intensity_latest.json"))])
    chain = SignalChain([em, make_provider("static", clock=clock)], zone="US-CAR-DUK", clock=clock, ttl_s=60,
                        backoff_base_s=60)
    first = chain.latest()
    assert first.provider == "static" and first.kind == Kind.STATIC and "HTTP 500" in chain.status().last_error
    clock.advance(120)
    assert chain.latest().provider == "electricitymaps"


def test_token_file_named_by_environment(server, monkeypatch, tmp_path):
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    secret = tmp_path / "mounted-secret"
    secret.write_text(TOKEN)
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN_FILE", str(secret))
    server.route("/carbon-intensity/latest", Reply(body=recorded("electricitymaps_v3_carbon-intensity_latest.json")))
    em = make_provider("electricitymaps", api_base=server.url)
    assert em.configured() and em.latest("US-CAR-DUK").intensity_g_per_kwh == 216
    assert server.hits("/carbon-intensity/latest")[0].headers["auth-token"] == TOKEN


def test_unreadable_token_file_names_the_file(monkeypatch, tmp_path):
    from greentrain.errors import ConfigError

    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="missing.token"):
        make_provider("electricitymaps", token_file=tmp_path / "missing.token")
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        make_provider("electricitymaps", token_file=empty)
