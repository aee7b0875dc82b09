"""`greentrain carbon now|forecast|history|providers` end to end (local servers only, never the internet)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "signals"))
from gt_signal_server import Reply, SignalServer, recorded  # noqa: E402

from greentrain.cli import main  # noqa: E402

pytestmark = pytest.mark.timeout(60)

EM_TOKEN = "em-cli-secret-99af"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for name in ("ELECTRICITYMAPS_TOKEN", "WATTTIME_USER", "WATTTIME_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with SignalServer() as s:
        yield s


def _same_hour_in_2022(when: datetime) -> datetime:
    return when.replace(year=2022, minute=0, second=0, microsecond=0)


def test_now_from_csv_trace_json(carbon_trace, capsys):
    trace = carbon_trace("GB_2022_hourly.csv")
    before = datetime.now(UTC)
    code, out, err = run(["carbon", "now", "--zone", "GB", "--provider", f"csv:{trace}", "--json"], capsys)
    after = datetime.now(UTC)
    assert code == 0, err
    (point,) = json.loads(out)["points"]
    assert (point["kind"], point["provider"], point["zone"], point["emission_factor"]) == (
        "actual", "csv", "GB", "direct")
    start = datetime.fromisoformat(point["start"])
    assert start in {_same_hour_in_2022(before), _same_hour_in_2022(after)}
    from greentrain.signals.trace import load_trace

    values = {p.start: p.intensity_g_per_kwh for p in load_trace(trace)}
    assert point["intensity_g_per_kwh"] == values[start]


def test_forecast_and_history_from_csv(carbon_trace, capsys):
    spec = f"csv:{carbon_trace('DE-LU_2022_hourly.csv')}"
    code, out, err = run(["carbon", "forecast", "--zone", "DE-LU", "--provider", spec, "--hours", "24", "--json"],
                         capsys)
    assert code == 0, err
    points = json.loads(out)["points"]
    assert len(points) == 24 and {p["kind"] for p in points} == {"forecast"}
    code, out, err = run(["carbon", "history", "--zone", "DE-LU", "--provider", spec, "--hours", "6", "--json"],
                         capsys)
    assert code == 0, err
    points = json.loads(out)["points"]
    assert 6 <= len(points) <= 7 and {p["kind"] for p in points} == {"actual"}


def test_now_electricitymaps_against_local_server(server, monkeypatch, capsys):
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", EM_TOKEN)
    server.route("/carbon-intensity/latest", Reply(body=recorded("electricitymaps_v3_carbon-intensity_latest.json")))
    code, out, err = run(["carbon", "now", "--zone", "US-CAR-DUK", "--provider", "electricitymaps",
                          "--api-base", server.url, "--json"], capsys)
    assert code == 0, err
    (point,) = json.loads(out)["points"]
    assert point["intensity_g_per_kwh"] == 216 and point["emission_factor"] == "lifecycle"
    assert server.hits("/carbon-intensity/latest")[0].headers["auth-token"] == EM_TOKEN


def test_now_ukgrid_against_local_server(server, capsys):
    server.route("/intensity", Reply(body=recorded("ukci_intensity.json")))
    code, out, err = run(["carbon", "now", "--zone", "GB", "--provider", "ukgrid", "--api-base", server.url,
                          "--json"], capsys)
    assert code == 0, err
    (point,) = json.loads(out)["points"]
    assert (point["intensity_g_per_kwh"], point["kind"], point["provider"]) == (263, "actual", "ukgrid")


def test_now_watttime_against_local_server(server, monkeypatch, capsys):
    monkeypatch.setenv("WATTTIME_USER", "someone")
    monkeypatch.setenv("WATTTIME_PASSWORD", "wt-cli-secret-77")
    server.route("/login", Reply(body=b'{"token": "jwt-cli"}'))
    body = json.loads(recorded("watttime_v3_historical.json"))
    recent = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    for i, item in enumerate(body["data"]):  # the recorded values, re-dated to the last hour
        item["point_time"] = (recent + timedelta(minutes=5 * i)).isoformat()
    server.route("/v3/historical", Reply(body=json.dumps(body).encode()))
    code, out, err = run(["carbon", "now", "--zone", "CAISO_NORTH", "--provider", "watttime",
                          "--api-base", server.url, "--json"], capsys)
    assert code == 0, err
    (point,) = json.loads(out)["points"]
    assert point["intensity_g_per_kwh"] == pytest.approx(860 * 0.45359237)
    assert point["provider"] == "watttime" and point["zone"] == "CAISO_NORTH"


def test_default_chain_reports_provider_and_status(capsys):
    code, out, err = run(["carbon", "now", "--zone", "DE-LU", "--json"], capsys)
    assert code == 0, err
    payload = json.loads(out)
    assert payload["points"][0]["kind"] == "static" and payload["status"]["provider"] == "static"
    assert payload["status"]["stale"] is False


def test_rejected_token_is_one_line_without_the_token(server, monkeypatch, capsys):
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", EM_TOKEN)
    server.route("/carbon-intensity/latest", Reply(status=401, body=b'{"message": "bad token"}'))
    code, out, err = run(["carbon", "now", "--zone", "GB", "--provider", "electricitymaps", "--api-base",
                          server.url], capsys)
    assert code == 2 and "401" in err and EM_TOKEN not in err + out
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["carbon", "now", "--zone", "GB", "--provider", "carbonfairy"], "valid: csv, electricitymaps"),
        (["carbon", "now", "--zone", "XX-NOWHERE"], "electricitymaps.com"),
        (["carbon", "now", "--zone", "DE", "--provider", "ukgrid", "--api-base", "http://127.0.0.1:9"], "postcode:"),
        (["carbon", "now", "--zone", "GB", "--provider", "csv:/no/such/trace.csv"], "cannot read trace"),
        (["carbon", "now", "--zone", "GB", "--api-base", "http://127.0.0.1:9"], "--provider"),
    ],
    ids=["unknown-provider", "unknown-zone", "ukgrid-zone", "missing-csv", "api-base-without-provider"],
)
def test_bad_input_is_one_line_exit_2(argv, needle, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and needle in err and "Traceback" not in err


def test_providers_lists_configuration_without_secrets(monkeypatch, capsys):
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", EM_TOKEN)
    code, out, err = run(["carbon", "providers", "--json"], capsys)
    assert code == 0, err
    rows = {row["name"]: row["configured"] for row in json.loads(out)}
    assert rows == {"csv": True, "electricitymaps": True, "static": True, "ukgrid": True, "watttime": False}
    assert EM_TOKEN not in out + err
    code, out, _ = run(["carbon", "providers"], capsys)
    assert code == 0 and "watttime" in out
