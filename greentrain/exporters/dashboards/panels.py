"""The panels, variables and board frame the job and node dashboards are made of, built with Grafana's typed SDK.

``grafana-foundation-sdk`` checks every option against Grafana's own schema as
the board is written, so a typo in a field is an error here, not a panel that
silently ignores it. Every panel and query reads Prometheus through the
``$datasource`` variable (never a ``${DS_...}`` import input), so provisioned
dashboards work as they are. Placing panels is ``layout.Grid``'s job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from greentrain.extras import require

require("grafana_foundation_sdk", "the dashboard generator")
from grafana_foundation_sdk.builders import bargauge as sdk_bargauge
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.builders import stat as sdk_stat
from grafana_foundation_sdk.builders import statetimeline as sdk_statetimeline
from grafana_foundation_sdk.builders import timeseries as sdk_timeseries
from grafana_foundation_sdk.builders.common import ReduceDataOptions, StackingConfig, VizLegendOptions, VizTooltipOptions
from grafana_foundation_sdk.builders.dashboard import (
    AnnotationQuery,
    Dashboard,
    DatasourceVariable,
    FieldColor,
    QueryVariable,
    ThresholdsConfig,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as c
from grafana_foundation_sdk.models import dashboard as model

from greentrain.exporters.dashboards.layout import Panel

__all__ = ["DATASOURCE", "Json", "Query", "bargauge", "board", "datasource_variable", "prometheus_annotation",
           "query_variable", "stat", "state_timeline", "targets", "timeseries", "to_json"]

Json = dict[str, Any]

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL target; ``legend`` uses Grafana's ``{{label}}`` syntax."""

    expr: str
    legend: str = ""


def targets(panel: Panel, queries: list[Query], *, instant: bool = False) -> None:
    """Add ``queries`` to ``panel`` as targets A, B, ... (range queries unless ``instant``)."""
    for i, q in enumerate(queries):
        target = (prometheus.Dataquery().expr(q.expr).legend_format(q.legend or "__auto").ref_id(chr(ord("A") + i))
                  .datasource(DATASOURCE))
        panel.with_target(target.instant() if instant else target.range())


def _legend() -> VizLegendOptions:
    return VizLegendOptions().display_mode(c.LegendDisplayMode.LIST).placement(c.LegendPlacement.BOTTOM) \
        .show_legend(True).calcs([])


def _last_value() -> ReduceDataOptions:
    return ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False)


def _base_color(color: str) -> ThresholdsConfig:
    return ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps([model.Threshold(value=None, color=color)])


def timeseries(title: str, description: str, queries: list[Query], unit: str, *, stack: bool = False,
               bars: bool = False, step_after: bool = False) -> sdk_timeseries.Panel:
    """A time-series graph: lines (or ``bars``), optionally stacked or drawn as steps."""
    panel = (sdk_timeseries.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit)
             .color_scheme(FieldColor().mode(model.FieldColorModeId.PALETTE_CLASSIC))
             .draw_style(c.GraphDrawStyle.BARS if bars else c.GraphDrawStyle.LINE).line_width(1)
             .fill_opacity(30 if (stack or bars) else 10).show_points(c.VisibilityMode.NEVER).span_nulls(False)
             .line_interpolation(c.LineInterpolation.STEP_AFTER if step_after else c.LineInterpolation.LINEAR)
             .stacking(StackingConfig().mode(c.StackingMode.NORMAL if stack else c.StackingMode.NONE).group("A"))
             .legend(_legend()).tooltip(VizTooltipOptions().mode(c.TooltipDisplayMode.MULTI)
                                        .sort(c.SortOrder.DESCENDING)))
    targets(panel, queries)
    return panel


def stat(title: str, description: str, query: Query, unit: str, *, decimals: int | None = None) -> sdk_stat.Panel:
    """A single big number: the last value, with its sparkline."""
    panel = (sdk_stat.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit)
             .color_scheme(FieldColor().mode(model.FieldColorModeId.THRESHOLDS)).thresholds(_base_color("green"))
             .reduce_options(_last_value()).color_mode(c.BigValueColorMode.VALUE)
             .graph_mode(c.BigValueGraphMode.AREA).text_mode(c.BigValueTextMode.AUTO)
             .justify_mode(c.BigValueJustifyMode.AUTO).orientation(c.VizOrientation.AUTO))
    if decimals is not None:
        panel.decimals(decimals)
    targets(panel, [query])
    return panel


def state_timeline(title: str, description: str, queries: list[Query],
                   states: dict[int, tuple[str, str]]) -> sdk_statetimeline.Panel:
    """A timeline of discrete states; ``states`` maps a value to (text, color)."""
    mapping = {str(v): model.ValueMappingResult(text=text, color=color, index=i)
               for i, (v, (text, color)) in enumerate(states.items())}
    panel = (sdk_statetimeline.Panel().title(title).description(description).datasource(DATASOURCE)
             .color_scheme(FieldColor().mode(model.FieldColorModeId.THRESHOLDS))
             .mappings([model.ValueMap(options=mapping)]).thresholds(_base_color("transparent"))
             .fill_opacity(80).line_width(0).merge_values(True).show_value(c.VisibilityMode.AUTO)
             .align_value(c.TimelineValueAlignment.LEFT).row_height(0.9).legend(_legend())
             .tooltip(VizTooltipOptions().mode(c.TooltipDisplayMode.SINGLE).sort(c.SortOrder.NONE)))
    targets(panel, queries)
    return panel


def bargauge(title: str, description: str, queries: list[Query], unit: str) -> sdk_bargauge.Panel:
    """Horizontal bars of current values (instant queries), e.g. energy per node over the dashboard's range."""
    panel = (sdk_bargauge.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit)
             .color_scheme(FieldColor().mode(model.FieldColorModeId.CONTINUOUS_GR_YL_RD)).min(0)
             .display_mode(c.BarGaugeDisplayMode.GRADIENT).orientation(c.VizOrientation.HORIZONTAL)
             .show_unfilled(True).reduce_options(_last_value()))
    targets(panel, queries, instant=True)
    return panel


def datasource_variable() -> DatasourceVariable:
    """The ``$datasource`` variable every panel uses."""
    return DatasourceVariable("datasource").label("Data source").type("prometheus")


def query_variable(name: str, label: str, query: str, *, multi: bool = False) -> QueryVariable:
    """A variable filled from ``label_values(...)``; multi-select ones offer All (= ``.*``)."""
    variable = (QueryVariable(name).label(label).datasource(DATASOURCE)
                .query({"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"})
                .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(model.VariableSort.ALPHABETICAL_ASC)
                .multi(multi).include_all(multi))
    return variable.all_value(".*") if multi else variable


class _PrometheusAnnotationModel(model.AnnotationQuery):
    """The SDK's annotation plus what Grafana's Prometheus data source reads beside ``expr``, which it leaves out."""

    def __init__(self, *, title_format: str, text_format: str, step: str) -> None:
        super().__init__()
        self.title_format, self.text_format, self.step = title_format, text_format, step

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "titleFormat": self.title_format, "textFormat": self.text_format,
                "step": self.step}


class _PrometheusAnnotation(AnnotationQuery):
    """The SDK's annotation builder, building :class:`_PrometheusAnnotationModel` instead of its plain model."""

    def __init__(self, *, title_format: str, text_format: str, step: str) -> None:
        super().__init__()
        self._internal = _PrometheusAnnotationModel(title_format=title_format, text_format=text_format, step=step)


def prometheus_annotation(name: str, expr: str, *, title_format: str, text_format: str, step: str,
                          icon_color: str) -> AnnotationQuery:
    """Markers on every graph where ``expr`` has a value, titled by ``title_format`` (``{{label}}`` syntax)."""
    annotation = _PrometheusAnnotation(title_format=title_format, text_format=text_format, step=step)
    return annotation.name(name).enable(True).icon_color(icon_color).datasource(DATASOURCE).expr(expr)


def board(*, uid: str, title: str, description: str, variables: list[DatasourceVariable | QueryVariable],
          annotations: list[AnnotationQuery] | None = None) -> Dashboard:
    """A greentrain dashboard with no panels yet: UTC, shared crosshair, last 6 h, refreshed every 30 s."""
    builtin = (AnnotationQuery().name("Annotations & Alerts").built_in(1).type("dashboard").enable(True).hide(True)
               .icon_color("rgba(0, 211, 255, 1)").datasource(model.DataSourceRef(type_val="grafana",
                                                                                 uid="-- Grafana --")))
    dash = (Dashboard(title).uid(uid).description(description).tags(["greentrain"]).timezone("utc").editable()
            .tooltip(model.DashboardCursorSync.CROSSHAIR).refresh("30s").time("now-6h", "now")
            .annotations([builtin, *(annotations or [])]))
    for variable in variables:
        dash.with_variable(variable)
    return dash


def to_json(dash: Dashboard) -> Json:
    """The dashboard as plain JSON data (Grafana's classic model)."""
    result: Json = json.loads(json.dumps(dash.build(), cls=JSONEncoder))
    return result
