"""The fleet dashboard (``greentrain fleet run``), built with Grafana's typed SDK.

``grafana-foundation-sdk`` checks every option against Grafana's own schema
as the board is written, so a typo in a field is an error here, not a panel
that silently ignores it. The SDK leaves panel ids and grid positions to the
caller: ``layout.Grid`` lays panels out in rows of 24 units, in call order.
The "Partitions" row shows a fleet spread over partitions on several grid
zones: where the plan puts GPUs, where jobs run, moves, emissions by zone.
"""

from __future__ import annotations

import json

from greentrain.extras import require

require("grafana_foundation_sdk", "the dashboard generator")
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.builders.common import StackingConfig, VizLegendOptions
from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement, LineInterpolation, StackingMode
from grafana_foundation_sdk.models.dashboard import DataSourceRef

import greentrain.exporters.names as n
from greentrain.exporters.dashboards.layout import Grid
from greentrain.exporters.dashboards.panels import Json, Query

__all__ = ["fleet_dashboard"]

_DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
_RATE = "$__rate_interval"


def _targets(panel: timeseries.Panel | stat.Panel, queries: list[Query]) -> None:
    for i, q in enumerate(queries):
        panel.with_target(prometheus.Dataquery().expr(q.expr).legend_format(q.legend or "__auto")
                          .ref_id(chr(ord("A") + i)).datasource(_DS).range())


def _series(title: str, description: str, queries: list[Query], unit: str, *, stack: bool = False,
            step_after: bool = False) -> timeseries.Panel:
    panel = (timeseries.Panel().title(title).description(description).datasource(_DS).unit(unit)
             .fill_opacity(30 if stack else 10).line_width(1)
             .legend(VizLegendOptions().display_mode(LegendDisplayMode.LIST).placement(LegendPlacement.BOTTOM)
                     .show_legend(True).calcs([]))
             .stacking(StackingConfig().mode(StackingMode.NORMAL if stack else StackingMode.NONE).group("A")))
    if step_after:
        panel.line_interpolation(LineInterpolation.STEP_AFTER)
    _targets(panel, queries)
    return panel


def _stat(title: str, description: str, query: Query, unit: str) -> stat.Panel:
    panel = stat.Panel().title(title).description(description).datasource(_DS).unit(unit)
    _targets(panel, [query])
    return panel


def fleet_dashboard() -> Json:
    """Build the fleet dashboard JSON."""
    board = (Dashboard("greentrain / fleet").uid("greentrain-fleet").tags(["greentrain"]).timezone("utc")
             .description("The fleet controller: GPUs in use against capacity, jobs by state, planned against "
                          "actual emissions, deadlines at risk; per partition: planned and running GPUs, migrations, "
                          "emissions and intensity by zone.")
             .refresh("30s").time("now-24h", "now").editable()
             .with_variable(DatasourceVariable("datasource").label("Data source").type("prometheus")))
    grid = Grid(board)
    gpus, jobs, emitted = n.FLEET_GPUS.name, n.FLEET_JOBS.name, n.FLEET_EMISSIONS.name
    grid.add(_series("GPUs in use vs capacity", "GPUs running jobs (managed and others) against the GPUs of the "
                     "managed partitions on nodes that are up.",
                     [Query(f'max({gpus}{{state="in_use"}})', "in use"),
                      Query(f'max({gpus}{{state="capacity"}})', "capacity")], "short", step_after=True), 12, 8)
    grid.add(_series("Fleet jobs by state", "Managed jobs: running, pausing (checkpointing on a signal), paused, waiting.",
                     [Query(f"max by (state) ({jobs})", "{{state}}")], "short", stack=True, step_after=True), 12, 8)
    grid.add(_series("Planned vs actual emissions", "Estimated gCO2eq per hour of what ran, and of what the plan "
                     "said would run over the same intervals.",
                     [Query(f'sum(rate({emitted}{{kind="actual"}}[{_RATE}])) * 3600', "actual"),
                      Query(f'sum(rate({emitted}{{kind="planned"}}[{_RATE}])) * 3600', "planned")],
                     "suffix: g/h"), 12, 8)
    grid.add(_series("Deadlines at risk", "Managed jobs the current plan cannot finish by their deadline.",
                     [Query(f"max({n.FLEET_DEADLINES_AT_RISK.name})", "at risk")], "short", step_after=True), 12, 8)
    grid.add(_stat("Planned remaining emissions", "What the current plan expects the remaining work to emit "
                   "(forecast), gCO2eq.", Query(f"max({n.FLEET_PLANNED_REMAINING.name})"), "suffix: g"), 8, 6)
    grid.add(_stat("Slurm command failures", "Slurm commands that failed over the dashboard's range; each left its "
                   "job as Slurm had it.", Query(f"sum(increase({n.FLEET_SLURM_ERRORS.name}[$__range]))"),
                   "short"), 8, 6)
    grid.add(_stat("Plan CPU time", "CPU time of the latest plan.", Query(f"max({n.FLEET_PLAN_SECONDS.name})"),
                   "s"), 8, 6)
    _partitions(grid)
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def _partitions(grid: Grid) -> None:
    """The "Partitions" row: per partition and per zone (one of each on a single-partition fleet)."""
    gpus, moves = n.FLEET_PARTITION_GPUS.name, n.FLEET_MIGRATIONS.name
    grid.row("Partitions")
    grid.add(_series("Planned vs running GPUs by partition", "GPUs the current plan runs managed jobs on now, "
                     "against the GPUs managed jobs run on, per partition.",
                     [Query(f'max by (partition) ({gpus}{{state="planned"}})', "{{partition}} planned"),
                      Query(f'max by (partition) ({gpus}{{state="running"}})', "{{partition}} running")],
                     "short", step_after=True), 12, 8)
    grid.add(_series("Capacity by partition", "GPUs of each managed partition on nodes that are up.",
                     [Query(f'max by (partition) ({gpus}{{state="capacity"}})', "{{partition}}")], "short",
                     step_after=True), 12, 8)
    grid.add(_series("Migrations", "Started jobs moved from one partition to another (their checkpoint with "
                     "them), per hour.",
                     [Query(f"sum by (from_partition, to_partition) (rate({moves}[{_RATE}])) * 3600",
                            "{{from_partition}} to {{to_partition}}")], "suffix: /h"), 8, 8)
    grid.add(_series("Emissions by zone", "Estimated gCO2eq per hour of the managed jobs, by the grid zone of the "
                     "partition they ran on.",
                     [Query(f"sum by (zone) (rate({n.FLEET_ZONE_EMISSIONS.name}[{_RATE}])) * 3600", "{{zone}}")],
                     "suffix: g/h", stack=True), 8, 8)
    grid.add(_series("Carbon intensity by zone", "The current hour's grid intensity on each partition's zone, as "
                     "the plan used it, gCO2eq/kWh.",
                     [Query(f"max by (zone) ({n.FLEET_PARTITION_INTENSITY.name})", "{{zone}}")], "suffix: g/kWh",
                     step_after=True), 8, 8)
