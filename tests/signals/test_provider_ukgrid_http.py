"""GB Carbon Intensity API client against a local server: national/regional, list-vs-object quirk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from gt_signal_server import Reply, SignalServer, recorded

from greentrain.clock import FrozenClock
from greentrain.errors import ConfigError, SignalError
from greentrain.signals import make_provider
from greentrain.signals.base import Kind

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server():
    with SignalServer() as s:
        yield s


def _uk(server, when):
    return make_provider("ukgrid", clock=FrozenClock(when), api_base=server.url)


def test_national_now_prefers_actual(server):
    server.route("/intensity", Reply(body=recorded("ukci_intensity.json")))
    point = _uk(server, datetime(2018, 1, 20, 12, 10, tzinfo=UTC)).latest("GB")
    assert point.intensity_g_per_kwh == 263 and point.kind == Kind.ACTUAL and not point.estimated
    assert point.end - point.start == timedelta(minutes=30) and point.zone == "GB"


def test_national_forecast_half_hourly(server):
    now = datetime(2020, 5, 21, 21, 0, tzinfo=UTC)
    server.route("/intensity/2020-05-21T21:00Z/fw48h",
                 Reply(body=recorded("ukci_intensity_from_fw24h_2020-05-21T2100Z.json")))
    points = _uk(server, now).forecast("GB", 24)
    assert points[0].start == now and points[0].intensity_g_per_kwh == 177  # the period ending at 'from' dropped
    assert all(p.kind == Kind.FORECAST for p in points)
    assert all(b.start == a.end for a, b in zip(points, points[1:], strict=False))
    assert points[-1].end <= now + timedelta(hours=24, minutes=30)


def test_regional_postcode_now_data_is_a_list(server):
    server.route("/regional/postcode/EC1V", Reply(body=recorded("ukci_regional_postcode_EC1V.json")))
    point = _uk(server, datetime(2021, 7, 23, 7, 10, tzinfo=UTC)).latest("postcode:EC1V")
    assert point.intensity_g_per_kwh == 107 and point.kind == Kind.FORECAST  # regional: no actual exists
    assert point.zone == "postcode:EC1V"


def test_regional_forecast_data_is_an_object(server):
    now = datetime(2025, 10, 22, 23, 40, tzinfo=UTC)
    server.route("/regional/intensity/2025-10-22T23:40Z/fw48h/postcode/BS16",
                 Reply(body=recorded("ukci_regional_intensity_from_fw48h_postcode_BS16.TRIMMED.json")))
    points = _uk(server, now).forecast("postcode:BS16", 48)
    assert [p.intensity_g_per_kwh for p in points] == [162, 164, 165]


def test_regional_answer_for_another_postcode_is_refused(server):
    server.route("/regional/postcode/BS16", Reply(body=recorded("ukci_regional_postcode_EC1V.json")))
    with pytest.raises(SignalError, match="EC1V"):
        _uk(server, datetime(2021, 7, 23, 7, 10, tzinfo=UTC)).latest("postcode:BS16")


def test_error_body_becomes_signal_error(server):
    server.route("/intensity", Reply(status=400, body=recorded("ukci_error_400.json")))
    with pytest.raises(SignalError, match="400"):
        _uk(server, datetime(2020, 1, 1, tzinfo=UTC)).latest("GB")


def test_bad_zone_lists_valid_forms(server):
    with pytest.raises(ConfigError, match="postcode:"):
        _uk(server, datetime(2020, 1, 1, tzinfo=UTC)).latest("DE")


def test_region_id_forecast_path_and_echo(server):
    now = datetime(2025, 10, 22, 23, 40, tzinfo=UTC)
    server.route("/regional/intensity/2025-10-22T23:40Z/fw48h/regionid/11",
                 Reply(body=recorded("ukci_regional_intensity_from_fw48h_postcode_BS16.TRIMMED.json")))
    points = _uk(server, now).forecast("region:11", 48)
    assert [p.intensity_g_per_kwh for p in points] == [162, 164, 165] and points[0].zone == "region:11"
    with pytest.raises(SignalError):  # the body is for region 11, not 12
        server.route("/regional/intensity/2025-10-22T23:40Z/fw48h/regionid/12",
                     Reply(body=recorded("ukci_regional_intensity_from_fw48h_postcode_BS16.TRIMMED.json")))
        _uk(server, now).forecast("region:12", 48)
