"""Against a real Prometheus: every metric, label, dashboard query and rule, through its HTTP API."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from gt_stack import JOB, Stack
from gt_promstack import DCGM_UUIDS, REPO, RULES, get_json, http_text

from greentrain.exporters import names as n
from greentrain.exporters.dashboards import DASHBOARDS, queries

pytestmark = pytest.mark.timeout(90)

# Series only an exited job pushes (tested in test_exporter_pushgateway.py).
AT_EXIT_ONLY = {n.JOB_FINISHED.name}
SCRAPE_LABELS = {"job", "instance"}


def _by_name(stack: Stack, name: str) -> list[dict]:
    return stack.prometheus.wait_for(f"{{__name__={name!r}}}", timeout_s=20)


@pytest.mark.parametrize("spec", [s for s in n.METRICS if s.name not in AT_EXIT_ONLY], ids=lambda s: s.name)
def test_every_metric_is_scraped_with_its_labels(stack: Stack, spec: n.MetricSpec) -> None:
    for series in _by_name(stack, spec.name):
        labels = set(series["metric"]) - {"__name__"}
        assert set(spec.labels) <= labels, (spec.name, labels)
        assert labels - set(spec.labels) <= SCRAPE_LABELS, f"{spec.name}: unexpected labels {labels}"


def _values(stack: Stack, expr: str) -> dict[str, float]:
    result = stack.prometheus.wait_for(expr, timeout_s=20)
    return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in result}


def test_gpu_series_are_plausible_and_match_the_measured_profile(stack: Stack) -> None:
    inst = stack.job_instance
    power = stack.prometheus.wait_for(f'greentrain_gpu_power_watts{{instance="{inst}"}}')
    by_uuid = {r["metric"]["UUID"]: float(r["value"][1]) for r in power}
    # Both ranks' GPUs are on the one node endpoint; the lost GPU has no power series.
    assert set(by_uuid) == set(DCGM_UUIDS)
    # What the A40 drew on ResNet-50 uncapped and at a 200 W cap in the Zeus profile, within the 5 % ripple.
    for gpu in stack.gpus[:2]:
        assert abs(by_uuid[gpu.uuid] / gpu.base_power_w() - 1) <= 0.051
    assert stack.gpus[1].base_power_w() < stack.gpus[0].base_power_w()
    limits = {r["metric"]["UUID"]: float(r["value"][1]) for r in
              stack.prometheus.query(f'greentrain_gpu_power_limit_watts{{instance="{inst}"}}')}
    assert limits == {DCGM_UUIDS[0]: 300.0, DCGM_UUIDS[1]: 200.0}
    clocks = stack.prometheus.query(f'greentrain_gpu_sm_clock_hertz{{instance="{inst}"}}')
    assert all(2e8 < float(r["value"][1]) <= 1.74e9 for r in clocks)
    ok = {r["metric"]["gpu"]: float(r["value"][1]) for r in
          stack.prometheus.query(f'greentrain_gpu_reading_ok{{instance="{inst}"}}')}
    assert ok == {"0": 1.0, "1": 1.0, "2": 0.0}
    # Energy counters grow at the power drawn (J/s = W). The slope over every scrape so far, not the last two
    # (irate): the counter moves in 0.2 s sampling ticks, so a 1 s scrape interval holds 4-6 of them on a loaded
    # machine. deriv, not rate: rate divides by the whole window, which a young series does not yet fill; and
    # only once ten scrapes are in it.
    energy = f'greentrain_gpu_energy_joules_total{{instance="{inst}",UUID="{DCGM_UUIDS[0]}"}}[30s]'
    rate = stack.prometheus.wait_for(f"deriv({energy}) and count_over_time({energy}) >= 10")
    assert float(rate[0]["value"][1]) == pytest.approx(stack.gpus[0].base_power_w(), rel=0.05)
    assert rate[0]["metric"]["source"] == "measured"


def test_ranks_are_merged_once_per_node(stack: Stack) -> None:
    j = f'{{job="{JOB}"}}'
    assert float(stack.prometheus.wait_for(f"greentrain_exporter_ranks{j}")[0]["value"][1]) == 2
    # One RAPL package seen by both ranks is counted once (65 W), not twice.
    cpu = stack.prometheus.wait_for(f'irate(greentrain_cpu_energy_joules_total{{instance="{stack.job_instance}"}}[30s])')
    assert len(cpu) == 1 and 55 < float(cpu[0]["value"][1]) < 75
    # Steps advance in lock-step (max); tokens are per rank (sum). Both ranks do 512 tokens a step, so the
    # sum exceeds one rank's worth (what max would give) and never exceeds two (rank 1's file may lag).
    sample = stack.prometheus.query(f'{{__name__=~"greentrain_training_(steps|tokens)_total",job="{JOB}"}}')
    values = {r["metric"]["__name__"]: float(r["value"][1]) for r in sample}
    steps, tokens = values["greentrain_training_steps_total"], values["greentrain_training_tokens_total"]
    assert steps > 0
    assert 512 * steps < tokens <= 2 * 512 * steps
    # Job state comes from the leader: exactly one state is 1.
    states = _values(stack, f"greentrain_job_state{j}")
    assert sorted(states.values()) == [0.0, 0.0, 1.0]
    assert _values(stack, f'greentrain_job_state{{job="{JOB}",state="running"}}') != {}


def test_job_series_carry_the_configured_job_label(stack: Stack) -> None:
    emissions = stack.prometheus.wait_for(f'greentrain_emissions_grams_total{{instance="{stack.job_instance}"}}')
    assert {r["metric"]["job"] for r in emissions} == {JOB}
    precision = stack.prometheus.wait_for("greentrain_job_precision_info")
    assert [r["metric"]["precision"] for r in precision] == ["bf16"]
    slack = stack.prometheus.wait_for(f'greentrain_job_deadline_timestamp_seconds{{job="{JOB}"}} - '
                                      f'greentrain_job_projected_finish_timestamp_seconds{{job="{JOB}"}}')
    assert float(slack[0]["value"][1]) == pytest.approx(-3600, abs=1)


def test_grid_intensity_is_the_replayed_trace_value(stack: Stack) -> None:
    series = stack.prometheus.wait_for(f'greentrain_grid_carbon_intensity_grams_per_kwh{{instance="{stack.job_instance}"}}')
    kinds = {r["metric"]["kind"]: float(r["value"][1]) for r in series}
    actual = stack.signals.peek()
    assert kinds["actual"] == pytest.approx(actual.intensity_g_per_kwh)
    assert kinds["forecast"] == pytest.approx(actual.intensity_g_per_kwh * 1.1)
    assert {r["metric"]["zone"] for r in series} == {"GB"}
    assert stack.signals.network_calls == 0  # the scrape read the cache only
    age = stack.prometheus.wait_for(f'greentrain_carbon_signal_age_seconds{{instance="{stack.job_instance}"}}')
    assert 9000 <= float(age[0]["value"][1]) < 9100


def _substitute(expr: str, stack: Stack) -> str:
    values = {"$job": JOB, "$instance": re.escape(stack.job_instance).replace("\\", "\\\\"), "$node": ".*",
              "$__rate_interval": "30s", "$__range": "1h", "$__interval": "5s"}
    for var, value in sorted(values.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def _dashboard_queries() -> list[tuple[str, str]]:
    out = []
    for filename, build in DASHBOARDS.items():
        for where, expr in queries(build()):
            out.append((f"{filename}: {where}", expr))
    return out


@pytest.mark.parametrize(("where", "expr"), _dashboard_queries(), ids=[w for w, _ in _dashboard_queries()])
def test_every_dashboard_query_returns_data(stack: Stack, where: str, expr: str) -> None:
    expr = _substitute(expr, stack)
    match = re.fullmatch(r"label_values\((.*), (\w+)\)", expr)
    if match:  # a variable: the label must have values
        values = get_json(f"{stack.prometheus.url}/api/v1/label/{match[2]}/values?match[]={match[1]}")["data"]
        assert values, where
        return
    assert stack.prometheus.wait_for(expr, timeout_s=20), where


def _rules() -> list[tuple[str, str]]:
    out = []
    for path in RULES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                out.append((rule.get("record") or rule["alert"], rule["expr"]))
    return out


@pytest.mark.parametrize(("name", "expr"), _rules(), ids=[name for name, _ in _rules()])
def test_every_rule_expression_returns_data(stack: Stack, name: str, expr: str) -> None:
    assert stack.prometheus.wait_for(expr, timeout_s=20), name


def test_prometheus_loaded_every_rule_healthy_and_alerts_go_pending(stack: Stack) -> None:
    groups = get_json(stack.prometheus.url + "/api/v1/rules")["data"]["groups"]
    loaded = {r["name"]: r for g in groups for r in g["rules"]}
    assert set(loaded) == {name for name, _ in _rules()}
    recorded = [name for name, r in loaded.items() if r["type"] == "recording"]
    for name in recorded:
        assert stack.prometheus.wait_for(name, timeout_s=20), name
    for name, r in loaded.items():
        assert r["health"] in ("ok", "unknown"), (name, r.get("lastError"))
    alerts = [name for name, r in loaded.items() if r["type"] == "alerting"]
    for name in alerts:
        assert stack.prometheus.wait_for(f'ALERTS{{alertname="{name}"}}', timeout_s=20), name


def test_dcgm_series_join_on_uuid(stack: Stack) -> None:
    joined = stack.prometheus.wait_for('greentrain_gpu_power_watts * on (UUID) group_left (modelName) '
                                       '(0 * DCGM_FI_DEV_POWER_USAGE + 1)')
    assert [r["metric"]["modelName"] for r in joined] == ["Tesla T4"]


def test_promtool_check_metrics_is_clean(stack: Stack) -> None:
    for server in (stack.job_server, stack.node_server, stack.fleet_server):
        assert server is not None
        done = subprocess.run(["/usr/bin/promtool", "check", "metrics"], input=http_text(server.url),
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


def test_fleet_partition_series_through_prometheus(stack: Stack) -> None:
    """Two partitions on two zones (tests/exporters/conftest.py): a job hops between them every 2 s."""
    gpus = {(r["metric"]["partition"], r["metric"]["zone"], r["metric"]["state"]) for r in
            stack.prometheus.wait_for(n.FLEET_PARTITION_GPUS.name)}
    assert gpus == {(p, z, s) for p, z in (("gpu-gb", "GB"), ("gpu-fr", "FR")) for s in ("planned", "running",
                                                                                        "capacity")}
    for a, b in (("gpu-gb", "gpu-fr"), ("gpu-fr", "gpu-gb")):
        assert stack.prometheus.wait_for(f'increase({n.FLEET_MIGRATIONS.name}{{from_partition="{a}",'
                                         f'to_partition="{b}"}}[30s]) > 0', timeout_s=20)
    intensity = {r["metric"]["zone"]: float(r["value"][1]) for r in
                 stack.prometheus.wait_for(n.FLEET_PARTITION_INTENSITY.name)}
    assert intensity["FR"] == 55.0 and 180.0 <= intensity["GB"] <= 184.0
    zones = {r["metric"]["zone"] for r in stack.prometheus.wait_for(
        f"rate({n.FLEET_ZONE_EMISSIONS.name}[30s]) > 0", timeout_s=20)}
    assert zones == {"GB", "FR"}


def test_node_endpoint_exports_devices_and_signal_but_no_job_series(stack: Stack) -> None:
    text = http_text(stack.node_server.url)
    assert "greentrain_gpu_power_watts{" in text
    assert 'kind="actual",provider="csv",zone="US-CAL-CISO"' in text
    assert "job=" not in text


def test_exposition_names_are_all_in_the_names_module(stack: Stack) -> None:
    text = http_text(stack.job_server.url)
    exported = {m for m in re.findall(r"^# TYPE (\S+)", text, re.MULTILINE)}
    families = {s.name for s in n.METRICS}
    assert exported <= families and exported


def test_rule_and_dashboard_files_exist_in_repo() -> None:
    assert (REPO / "exporters" / "prometheus.yml").is_file()
    assert len(RULES) == 2 and all(isinstance(p, Path) for p in RULES)


@pytest.mark.timeout(240)
def test_dashboard_previews_render_every_panel_with_data(stack: Stack, tmp_path: Path) -> None:
    """Each panel drawn from Prometheus range queries; GREENTRAIN_WRITE_PREVIEWS=1 refreshes docs/img."""
    import os
    import time

    from greentrain.exporters.dashboards.preview import prometheus_range, render_preview

    stack.prometheus.wait_for('ALERTS{alertname="GreentrainPowerCapRefused"}', timeout_s=20)
    for_docs = os.environ.get("GREENTRAIN_WRITE_PREVIEWS") == "1"
    if for_docs:
        time.sleep(100)  # opt-in only: gather ~2 minutes of series, with pauses, for the docs images
    out_dir = REPO / "docs" / "img" if for_docs else tmp_path
    out_dir.mkdir(parents=True, exist_ok=True)
    end_s = time.time()
    query = prometheus_range(stack.prometheus.url, end_s - 120, end_s, 1.0)
    variables = {"job": JOB, "instance": re.escape(stack.job_instance).replace("\\", "\\\\"), "node": ".*"}
    for filename, build in DASHBOARDS.items():
        png = out_dir / filename.replace(".json", ".png")
        empty = render_preview(build(), query, png, variables=variables, range_s=120, step_s=1.0)
        assert empty == [], f"{filename}: panels without data: {empty}"
        assert png.read_bytes().startswith(b"\x89PNG")
