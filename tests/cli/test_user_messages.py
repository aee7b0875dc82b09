"""What a user is told when something is off: every problem of a file in one pass, "did you mean" for zones,
policies, presets and providers, an empty forecast's reason, providers not checked, one prefix per error, the
exporter's real default port, blame on the file key or flag a value came from, a trace's own zone, and what a
monitor figure covers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.cli import main
from greentrain.errors import ConfigError

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
DE_TRACE = ROOT / "tests" / "data" / "carbon" / "DE-LU_2022_hourly.csv"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, list[str]]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err.splitlines()


def test_a_policy_file_with_five_mistakes_reports_all_five_at_once(capsys) -> None:
    code, _, err = run_cli(capsys, "policy", "validate", str(ROOT / "examples" / "bad-policy.toml"))
    assert code == 2
    keys = sorted(line.split(": ")[3] for line in err)
    assert keys == ["policy.colour", "policy.description", "policy.safety_z", "settings.pause_mode",
                    "settings.resume_overhead_s"], err
    assert "Traceback" not in "\n".join(err)


@pytest.mark.parametrize(("args", "suggestion"), [
    (["carbon", "now", "--zone", "UK"], "did you mean 'GB' (United Kingdom)"),
    (["carbon", "now", "--zone", "GB", "--provider", "electricmaps"], "did you mean 'electricitymaps'"),
    (["policy", "show", "carbon-awre"], "did you mean 'carbon-aware'"),
    (["run", "--policy", "carbon-awre", "--", "true"], "did you mean 'carbon-aware'"),
])
def test_a_near_miss_gets_one_line_with_the_name_meant(capsys, args: list[str], suggestion: str) -> None:
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and len(err) == 1 and suggestion in err[0], err


def test_session_zone_alias_names_the_zone_id() -> None:
    from greentrain import Session

    with pytest.raises(ConfigError, match=r"zone: 'UK' is not an Electricity Maps zone id; did you mean 'GB'"):
        with Session(zone="UK", devices=False, progress=False, relaunch="none"):
            pass


def test_an_empty_forecast_says_why(capsys, monkeypatch) -> None:
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    code, out, err = run_cli(capsys, "carbon", "forecast", "--zone", "FR", "--hours", "6", "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["points"] == [] and "static has annual averages only" in payload["reason"]
    assert err and err[0].startswith("greentrain: no forecast for FR: static has annual averages only")


def test_provider_status_says_not_checked_and_an_error_has_one_prefix(capsys, monkeypatch) -> None:
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    code, out, _ = run_cli(capsys, "carbon", "providers", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0 and rows["ukgrid"]["reachable"] == "not checked" and rows["static"]["reachable"] == "offline"
    code, _, err = run_cli(capsys, "carbon", "forecast", "--zone", "GB", "--provider", "electricitymaps")
    assert code == 2 and "no API token" in err[0] and "electricitymaps: electricitymaps" not in err[0], err


def test_exporter_help_gives_the_port_it_serves_on(capsys) -> None:
    code, out, _ = run_cli(capsys, "exporter", "--help")
    assert code == 0 and "default: 9877" in " ".join(out.split()) and "Off when not given" not in out


def test_runtime_config_blames_the_file_key_and_honours_allow_public(tmp_path: Path) -> None:
    from greentrain.cli.train import build_config_with_sources
    from greentrain.runtime.preflight import preflight

    public = tmp_path / "public.toml"
    public.write_text('[metrics]\naddr = "0.0.0.0"\nport = 0\n')
    cfg, where = build_config_with_sources(str(public), {}, ())
    with pytest.raises(ConfigError, match=rf"^{public}: metrics.addr: 0.0.0.0 is not a loopback address"):
        preflight(cfg, where, world_size=1, probe_folders=False)
    cfg, where = build_config_with_sources(str(public), {"metrics_addr": "0.0.0.0"}, ())
    with pytest.raises(ConfigError, match=r"^--metrics-addr: 0.0.0.0 is not a loopback address"):
        preflight(cfg, where, world_size=1, probe_folders=False)
    public.write_text('[metrics]\naddr = "0.0.0.0"\nport = 0\nallow_public = true\n')
    cfg, where = build_config_with_sources(str(public), {}, ())
    preflight(cfg, where, world_size=1, probe_folders=False)  # allowed by the file


def test_runtime_config_says_every_problem_in_one_pass(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "job.toml"
    bad.write_text('train = 5\n[model]\nn_kv_heads = 0\n[greentrain]\nzone = "UK"\npause_mode = "sometimes"\n')
    code, _, err = run_cli(capsys, "train", "--config", str(bad))
    assert code == 2 and "Traceback" not in "\n".join(err)
    assert [line.split(": ")[3] for line in err] == ["train", "model.n_kv_heads", "greentrain.pause_mode",
                                                     "greentrain.zone"], err


def test_a_trace_of_another_zone_is_refused_before_any_work(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(capsys, "run", "--no-measure", "--provider", f"csv:{DE_TRACE}", "--zone", "GB", "--",
                           "true")
    assert code == 2 and len(err) == 1 and "is for zone 'DE', not 'GB'" in err[0], err
    out = tmp_path / "demo"
    code, _, err = run_cli(capsys, "demo", "--trace", str(DE_TRACE), "--start", "2022-03-14T00:00Z", "--zone", "GB",
                           "--out", str(out), "--metrics-port", "0")
    assert code == 2 and "--zone: trace DE-LU_2022_hourly.csv is for zone 'DE', not 'GB'" in err[-1], err
    assert not out.exists(), "nothing written before the refusal"


def test_a_trace_gives_its_zone_when_none_is_given() -> None:
    from greentrain.cli.demo import _scenario

    scenario = _scenario(None, DE_TRACE, "2022-03-14T00:00Z", 8.0, None, 480.0)
    assert scenario.zone == "DE"


def test_monitor_says_its_figures_cover_whole_devices(capsys) -> None:
    code, out, _ = run_cli(capsys, "monitor", "--json", "--interval-s", "0.05", "--", "true")
    report = json.loads(out)
    assert code == 0 and {d["scope"] for d in report["devices"]} <= {"whole host", "whole GPU"}
    assert any("covers a whole device" in note and "not true alone" in note for note in report["notes"])
