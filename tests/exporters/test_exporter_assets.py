"""The YAML/JSON assets: rules pass promtool (check + unit tests), dashboards match their generator."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml
from gt_promstack import REPO

from greentrain.exporters import names as n
from greentrain.exporters.dashboards import DASHBOARDS, queries, render

pytestmark = pytest.mark.timeout(60)

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
needs_promtool = pytest.mark.skipif(not shutil.which(PROMTOOL), reason="promtool not installed")
EXPORTERS = REPO / "exporters"
GRAFANA = REPO / "grafana"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=30, cwd=EXPORTERS)


@needs_promtool
def test_rules_pass_promtool_check() -> None:
    done = _promtool("check", "rules", *sorted(str(p) for p in (EXPORTERS / "rules").glob("*.yml")))
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_rule_unit_tests_pass() -> None:
    tests = sorted(str(p) for p in (EXPORTERS / "tests").glob("*_test.yml"))
    assert len(tests) == 2
    done = _promtool("test", "rules", *tests)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_every_alert_has_a_promtool_test() -> None:
    alerts = {r["alert"] for g in yaml.safe_load((EXPORTERS / "rules" / "greentrain-alerts.yml").read_text())["groups"]
              for r in g["rules"]}
    tested = {t["alertname"] for t in yaml.safe_load((EXPORTERS / "tests" / "alerts_test.yml").read_text())["tests"]
              for t in t.get("alert_rule_test", [])}
    assert alerts == tested
    recorded = {r["record"] for g in yaml.safe_load((EXPORTERS / "rules" / "greentrain-recording.yml").read_text())[
        "groups"] for r in g["rules"]}
    tested = {t["expr"] for t in yaml.safe_load((EXPORTERS / "tests" / "recording_test.yml").read_text())["tests"]
              for t in t.get("promql_expr_test", [])}
    assert recorded == tested


@needs_promtool
def test_example_scrape_config_is_valid() -> None:
    done = _promtool("check", "config", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("filename", sorted(DASHBOARDS))
def test_committed_dashboard_json_is_what_the_code_generates(filename: str) -> None:
    committed = (GRAFANA / "dashboards" / filename).read_text()
    assert committed == render(DASHBOARDS[filename]), \
        f"grafana/dashboards/{filename} is stale: run python -m greentrain.exporters.dashboards grafana/dashboards"


@pytest.mark.parametrize("filename", sorted(DASHBOARDS))
def test_dashboard_model(filename: str) -> None:
    text = (GRAFANA / "dashboards" / filename).read_text()
    board = json.loads(text)
    assert "${DS_" not in text and "__inputs" not in board
    assert board["schemaVersion"] >= 39 and board["uid"].startswith("greentrain-")
    variables = board["templating"]["list"]
    assert variables[0] == {**variables[0], "type": "datasource", "name": "datasource", "query": "prometheus"}
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        if panel["type"] == "row":  # a heading: expanded, no queries, the whole width
            assert not panel["collapsed"] and not panel["panels"] and pos["w"] == 24 and pos["x"] == 0
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["description"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
    metric_names = {s.name for s in n.METRICS}
    used = {m for _, expr in queries(board) for m in re.findall(r"greentrain_[a-z_]+", expr)}
    assert used and used <= metric_names


def test_job_dashboard_has_every_required_panel() -> None:
    titles = {p["title"] for p in DASHBOARDS["greentrain-job.json"]()["panels"]}
    assert {"Power per GPU", "Energy", "Grid carbon intensity: actual vs forecast", "Emissions and avoided emissions",
            "Job state", "Power limit", "Precision", "Policy actions", "Replicas"} <= titles


def _no_overlap(board: dict) -> None:
    cells = set()
    for panel in board["panels"]:
        pos = panel["gridPos"]
        here = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & here, f"panel {panel['title']!r} overlaps another"
        cells |= here


def test_fleet_dashboard_has_a_partitions_row_on_the_partition_metrics() -> None:
    board = DASHBOARDS["greentrain-fleet.json"]()
    _no_overlap(board)
    panels = board["panels"]
    row = next(i for i, p in enumerate(panels) if p["type"] == "row")
    assert panels[row]["title"] == "Partitions"
    below = panels[row + 1:]
    assert all(p["gridPos"]["y"] > panels[row]["gridPos"]["y"] for p in below)
    assert {p["title"] for p in below} == {"Planned vs running GPUs by partition", "Capacity by partition",
                                           "Migrations", "Emissions by zone", "Carbon intensity by zone"}
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in below}
    gpus = n.FLEET_PARTITION_GPUS.name
    assert exprs["Planned vs running GPUs by partition"] == [f'max by (partition) ({gpus}{{state="planned"}})',
                                                             f'max by (partition) ({gpus}{{state="running"}})']
    assert exprs["Capacity by partition"] == [f'max by (partition) ({gpus}{{state="capacity"}})']
    assert n.FLEET_MIGRATIONS.name in exprs["Migrations"][0] and "rate(" in exprs["Migrations"][0]
    assert "sum by (zone)" in exprs["Emissions by zone"][0] and n.FLEET_ZONE_EMISSIONS.name in exprs[
        "Emissions by zone"][0]
    assert exprs["Carbon intensity by zone"] == [f"max by (zone) ({n.FLEET_PARTITION_INTENSITY.name})"]
    stacked = next(p for p in below if p["title"] == "Emissions by zone")
    assert stacked["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    for spec in (n.FLEET_PARTITION_GPUS, n.FLEET_MIGRATIONS, n.FLEET_ZONE_EMISSIONS, n.FLEET_PARTITION_INTENSITY):
        assert spec in n.FLEET_METRICS and {"partition", "zone", "from_partition"} & set(spec.labels)


@needs_promtool
def test_fleet_dashboard_queries_parse(tmp_path) -> None:
    """promtool parses every fleet board query (the live stack also runs them against data)."""
    rules = [{"record": f"fleet:query{i}", "expr": expr.replace("$__rate_interval", "1m").replace("$__range", "1h")}
             for i, (_, expr) in enumerate(queries(DASHBOARDS["greentrain-fleet.json"]()))]
    path = tmp_path / "fleet-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "fleet", "rules": rules}]}))
    done = _promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_node_dashboard_joins_dcgm() -> None:
    exprs = [expr for _, expr in queries(DASHBOARDS["greentrain-node.json"]())]
    assert any("on (UUID)" in e and "DCGM_FI_DEV_POWER_USAGE" in e for e in exprs)


def test_provisioning_files() -> None:
    dash = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "greentrain.yaml").read_text())
    assert dash["apiVersion"] == 1 and dash["providers"][0]["type"] == "file"
    sources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    assert sources["datasources"][0]["type"] == "prometheus"


def test_docs_describe_every_panel_metric_rule_and_alert() -> None:
    doc = (REPO / "docs" / "prometheus-grafana.md").read_text()
    for filename, build in DASHBOARDS.items():
        for panel in build()["panels"]:
            if panel["type"] == "row":
                assert f"Row **{panel['title']}**" in doc, f"{filename}: row {panel['title']!r} is not described"
                continue
            assert f"| {panel['title']} |" in doc, f"{filename}: panel {panel['title']!r} is not described"
    for spec in n.METRICS:
        assert f"`{spec.name}`" in doc, spec.name
    for path in (EXPORTERS / "rules").glob("*.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                assert f"`{rule.get('record') or rule['alert']}`" in doc
