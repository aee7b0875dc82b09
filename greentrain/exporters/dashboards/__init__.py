"""Grafana dashboards, generated from code: the single source of truth for ``grafana/dashboards/*.json``.

Regenerate after changing a panel::

    python -m greentrain.exporters.dashboards grafana/dashboards

A test fails if the committed JSON differs from what this code builds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from greentrain.exporters.dashboards.fleet import fleet_dashboard
from greentrain.exporters.dashboards.job import job_dashboard
from greentrain.exporters.dashboards.node import node_dashboard
from greentrain.exporters.dashboards.panels import Json

__all__ = ["DASHBOARDS", "queries", "render", "write_dashboards"]

DASHBOARDS: dict[str, Callable[[], Json]] = {
    "greentrain-job.json": job_dashboard,
    "greentrain-node.json": node_dashboard,
    "greentrain-fleet.json": fleet_dashboard,
}


def render(build: Callable[[], Json]) -> str:
    """Dashboard JSON text, stable (sorted keys, 2-space indent, trailing newline)."""
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def write_dashboards(out_dir: str | Path) -> list[Path]:
    """Write every dashboard into ``out_dir``; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, build in DASHBOARDS.items():
        path = out / filename
        path.write_text(render(build), encoding="utf-8")
        written.append(path)
    return written


def queries(dashboard: Json) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target, annotation and query variable of a dashboard."""
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if "expr" in annotation:
            yield f"annotation {annotation['name']!r}", annotation["expr"]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            yield f"variable ${variable['name']}", query["query"] if isinstance(query, dict) else query
