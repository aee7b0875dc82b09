"""Small builders for Grafana's classic dashboard JSON model.

Every panel queries Prometheus through the ``$datasource`` template variable
(never a ``${DS_...}`` import input), so provisioned dashboards work as-is.
Panels are laid out left to right in rows of 24 grid units, in call order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DATASOURCE",
    "SCHEMA_VERSION",
    "Layout",
    "Query",
    "bargauge",
    "dashboard",
    "datasource_variable",
    "query_variable",
    "stat",
    "state_timeline",
    "timeseries",
]

SCHEMA_VERSION = 41
"""Classic JSON model schema of current Grafana (11.x/12.x)."""

DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL target; ``legend`` uses Grafana's ``{{label}}`` syntax."""

    expr: str
    legend: str = ""


@dataclass(slots=True)
class Layout:
    """Places panels in rows of 24 units and numbers them."""

    x: int = 0
    y: int = 0
    row_h: int = 0
    next_id: int = 1
    panels: list[Json] = field(default_factory=list)

    def add(self, panel: Json, w: int, h: int) -> None:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        panel["id"] = self.next_id
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.next_id += 1
        self.x += w
        self.row_h = max(self.row_h, h)
        self.panels.append(panel)


def _targets(queries: list[Query], instant: bool = False) -> list[Json]:
    return [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": q.expr, "legendFormat": q.legend or "__auto",
             "range": not instant, "instant": instant} for i, q in enumerate(queries)]


def _panel(kind: str, title: str, description: str, queries: list[Query], defaults: Json, options: Json,
           instant: bool = False) -> Json:
    return {"type": kind, "title": title, "description": description, "datasource": DATASOURCE,
            "fieldConfig": {"defaults": defaults, "overrides": []}, "options": options,
            "targets": _targets(queries, instant)}


_LEGEND = {"displayMode": "list", "placement": "bottom", "showLegend": True}


def timeseries(title: str, description: str, queries: list[Query], unit: str, *, stack: bool = False,
               bars: bool = False, step_after: bool = False) -> Json:
    """A time-series graph."""
    custom = {"drawStyle": "bars" if bars else "line", "lineWidth": 1, "fillOpacity": 30 if (stack or bars) else 10,
              "showPoints": "never", "spanNulls": False,
              "lineInterpolation": "stepAfter" if step_after else "linear",
              "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    return _panel("timeseries", title, description, queries,
                  {"unit": unit, "color": {"mode": "palette-classic"}, "custom": custom},
                  {"legend": _LEGEND, "tooltip": {"mode": "multi", "sort": "desc"}})


def stat(title: str, description: str, query: Query, unit: str, *, decimals: int | None = None) -> Json:
    """A single big number (last value)."""
    defaults: Json = {"unit": unit, "color": {"mode": "thresholds"},
                      "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}]}}
    if decimals is not None:
        defaults["decimals"] = decimals
    return _panel("stat", title, description, [query], defaults,
                  {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                   "colorMode": "value", "graphMode": "area", "textMode": "auto", "justifyMode": "auto",
                   "orientation": "auto"})


def state_timeline(title: str, description: str, queries: list[Query], states: dict[int, tuple[str, str]]) -> Json:
    """A timeline of discrete states; ``states`` maps a value to (text, color)."""
    mapping = {str(v): {"text": text, "color": color, "index": i} for i, (v, (text, color)) in enumerate(states.items())}
    return _panel("state-timeline", title, description, queries,
                  {"color": {"mode": "thresholds"}, "mappings": [{"type": "value", "options": mapping}],
                   "thresholds": {"mode": "absolute", "steps": [{"color": "transparent", "value": None}]},
                   "custom": {"fillOpacity": 80, "lineWidth": 0}},
                  {"mergeValues": True, "showValue": "auto", "alignValue": "left", "rowHeight": 0.9,
                   "legend": _LEGEND, "tooltip": {"mode": "single", "sort": "none"}})


def bargauge(title: str, description: str, queries: list[Query], unit: str) -> Json:
    """Horizontal bars of current values, e.g. energy per node over the dashboard's range."""
    return _panel("bargauge", title, description, queries,
                  {"unit": unit, "color": {"mode": "continuous-GrYlRd"}, "min": 0},
                  {"displayMode": "gradient", "orientation": "horizontal", "showUnfilled": True,
                   "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}, instant=True)


def datasource_variable() -> Json:
    """The ``$datasource`` variable every panel uses."""
    return {"type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": [], "includeAll": False, "multi": False}


def query_variable(name: str, label: str, query: str, *, multi: bool = False) -> Json:
    """A variable filled from ``label_values(...)``; multi-select ones offer All (= ``.*``)."""
    return {"type": "query", "name": name, "label": label, "datasource": DATASOURCE, "definition": query,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "current": {}, "hide": 0, "refresh": 2, "regex": "", "sort": 1, "options": [],
            "multi": multi, "includeAll": multi, "allValue": ".*" if multi else None}


def dashboard(*, uid: str, title: str, description: str, layout: Layout, variables: list[Json],
              annotations: list[Json] | None = None) -> Json:
    """The full dashboard object (classic model)."""
    builtin = {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
               "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}
    return {"uid": uid, "title": title, "description": description, "tags": ["greentrain"], "timezone": "utc",
            "editable": True, "graphTooltip": 1, "id": None, "schemaVersion": SCHEMA_VERSION, "version": 1,
            "refresh": "30s", "time": {"from": "now-6h", "to": "now"}, "fiscalYearStartMonth": 0,
            "liveNow": False, "links": [], "annotations": {"list": [builtin, *(annotations or [])]},
            "templating": {"list": variables}, "panels": layout.panels}
