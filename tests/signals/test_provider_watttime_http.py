"""WattTime v3 client against a local server: login, token renewal, MOER units, percentile signal."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from gt_signal_server import Reply, Request, SignalServer, recorded

from greentrain.clock import FrozenClock
from greentrain.errors import AuthError, SignalError
from greentrain.signals import make_provider
from greentrain.signals.base import Kind
from greentrain.signals.providers.watttime import parse_data

pytestmark = pytest.mark.timeout(60)

USER, PASSWORD = "gt-user", "wt-pass-7c1e9b"
LB_PER_MWH = 0.45359237


class TokenIssuer:
    """/login that checks basic auth and issues numbered tokens; data routes check the bearer."""

    def __init__(self) -> None:
        self.issued: list[str] = []
        self.revoked: set[str] = set()

    def login(self, request: Request) -> Reply:
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if request.headers.get("authorization") != expected:
            return Reply(status=401, body=b'{"error": "bad credentials"}')
        token = f"jwt-{len(self.issued) + 1}"
        self.issued.append(token)
        return Reply(body=json.dumps({"token": token}).encode())

    def data(self, name: str):
        def reply(request: Request) -> Reply:
            token = request.headers.get("authorization", "").removeprefix("Bearer ")
            if token not in self.issued or token in self.revoked:
                return Reply(status=401, body=recorded("watttime_v3_error_invalid-scope.json"))
            return Reply(body=recorded(name))

        return reply


@pytest.fixture
def setup(monkeypatch):
    monkeypatch.setenv("WATTTIME_USER", USER)
    monkeypatch.setenv("WATTTIME_PASSWORD", PASSWORD)
    issuer = TokenIssuer()
    with SignalServer() as server:
        server.route("/login", issuer.login)
        server.route("/v3/forecast", issuer.data("watttime_v3_forecast.json"))
        server.route("/v3/historical", issuer.data("watttime_v3_historical.json"))
        server.route("/v3/signal-index", issuer.data("watttime_v3_signal-index.json"))
        clock = FrozenClock(datetime(2022, 7, 15, 0, 2, tzinfo=UTC))
        provider = make_provider("watttime", clock=clock, api_base=server.url)
        yield server, issuer, clock, provider
        provider.close()


def test_forecast_converts_lbs_per_mwh_to_g_per_kwh(setup):
    server, issuer, _clock, wt = setup
    points = wt.forecast("CAISO_NORTH", 1)
    assert [p.intensity_g_per_kwh for p in points] == pytest.approx(
        [1048.4131919701972 * LB_PER_MWH, 1051.0880801214637 * LB_PER_MWH]
    )
    assert points[0].kind == Kind.FORECAST and points[0].end - points[0].start == timedelta(minutes=5)
    assert points[0].zone == "CAISO_NORTH" and points[0].provider == "watttime"
    (request,) = server.hits("/v3/forecast")
    assert request.headers["authorization"] == "Bearer jwt-1"
    assert request.query["region"] == ["CAISO_NORTH"] and request.query["signal_type"] == ["co2_moer"]


def test_latest_from_historical_with_imputed_flag(setup):
    _server, _issuer, clock, wt = setup
    clock.advance(5 * 60)
    point = wt.latest("CAISO_NORTH")
    assert point.intensity_g_per_kwh == pytest.approx(860 * LB_PER_MWH)
    assert point.kind == Kind.ACTUAL and point.estimated is True  # imputed_data_used


def test_token_reused_then_renewed_before_expiry(setup):
    server, issuer, clock, wt = setup
    wt.forecast("CAISO_NORTH", 1)
    clock.advance(10 * 60)
    wt.forecast("CAISO_NORTH", 1)
    assert len(server.hits("/login")) == 1  # token still valid: reused
    clock.advance(17 * 60)  # 27 min after login: inside the renewal margin of a 30-min token
    wt.forecast("CAISO_NORTH", 1)
    assert len(server.hits("/login")) == 2
    assert server.hits("/v3/forecast")[-1].headers["authorization"] == "Bearer jwt-2"


def test_token_renewed_on_401(setup):
    server, issuer, _clock, wt = setup
    wt.forecast("CAISO_NORTH", 1)
    issuer.revoked.add("jwt-1")  # revoked early by the server
    points = wt.forecast("CAISO_NORTH", 1)
    assert points and len(server.hits("/login")) == 2


def test_bad_credentials_are_an_auth_error_without_the_password(setup, monkeypatch):
    server, _issuer, clock, _wt = setup
    monkeypatch.setenv("WATTTIME_PASSWORD", "wrong-password-123")
    wt = make_provider("watttime", clock=clock, api_base=server.url)
    with pytest.raises(AuthError) as info:
        wt.forecast("CAISO_NORTH", 1)
    assert "wrong-password-123" not in str(info.value)
    wt.close()


def test_signal_index_stays_a_percentile(setup):
    _server, _issuer, _clock, wt = setup
    index = wt.signal_index("PSCO")
    assert index.percentile == 96.0 and not hasattr(index, "intensity_g_per_kwh")
    # The percentile body is never accepted as an emission rate.
    with pytest.raises(SignalError, match="percentile"):
        parse_data(json.loads(recorded("watttime_v3_signal-index.json")), "PSCO", Kind.ACTUAL)


def test_wrong_region_echoed_is_refused():
    body = json.loads(recorded("watttime_v3_forecast.json"))
    with pytest.raises(SignalError, match="zone|region"):
        parse_data(body, "PJM_DC", Kind.FORECAST)


def test_unconfigured_without_credentials(monkeypatch):
    monkeypatch.delenv("WATTTIME_USER", raising=False)
    monkeypatch.delenv("WATTTIME_PASSWORD", raising=False)
    wt = make_provider("watttime", api_base="http://127.0.0.1:9")
    assert not wt.configured()
    with pytest.raises(AuthError):
        wt.latest("CAISO_NORTH")
