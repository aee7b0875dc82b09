"""The node/fleet dashboard: power and energy by node and GPU, and jobs across the fleet.

GPU series keep dcgm-exporter's ``gpu`` and ``UUID`` labels, so the dcgm panels
join the two exporters ``on (UUID)``.
"""

from __future__ import annotations

import greentrain.exporters.names as n
from greentrain.exporters.dashboards.layout import Grid
from greentrain.exporters.dashboards.panels import (
    Json,
    Query,
    bargauge,
    board,
    datasource_variable,
    query_variable,
    state_timeline,
    timeseries,
    to_json,
)

__all__ = ["node_dashboard"]

N = '{instance=~"$node"}'
RATE = "$__rate_interval"


def _power(layout: Grid) -> None:
    layout.add(timeseries("GPU power by node", "Sum of GPU board power per node.",
                          [Query(f"sum by (instance) ({n.GPU_POWER.name}{N})", "{{instance}}")],
                          "watt", stack=True), 12, 8)
    layout.add(timeseries("GPU power by GPU", "Board power of every GPU.",
                          [Query(f"{n.GPU_POWER.name}{N}", "{{instance}} GPU {{gpu}}")], "watt"), 12, 8)
    layout.add(bargauge("GPU energy by node", "GPU energy per node over the dashboard's time range.",
                        [Query(f"sum by (instance) (increase({n.GPU_ENERGY.name}{N}[$__range]))", "{{instance}}")],
                        "joule"), 8, 8)
    layout.add(bargauge("GPU energy by GPU", "Energy of each GPU over the dashboard's time range.",
                        [Query(f"sum by (instance, gpu, UUID) (increase({n.GPU_ENERGY.name}{N}[$__range]))",
                               "{{instance}} GPU {{gpu}}")], "joule"), 8, 8)
    layout.add(timeseries("CPU power by package", "Host CPU/DRAM power from RAPL counters (or an estimate).",
                          [Query(f"sum by (instance, package) (rate({n.CPU_ENERGY.name}{N}[{RATE}]))",
                                 "{{instance}} {{package}}")], "watt"), 8, 8)


def _dcgm(layout: Grid) -> None:
    layout.add(timeseries("Power: greentrain vs dcgm-exporter",
                          "The same GPUs seen by both exporters, joined on UUID; the lines should agree.", [
                              Query(f"{n.GPU_POWER.name}{N} * on (UUID) group_left (modelName, Hostname) "
                                    "(0 * DCGM_FI_DEV_POWER_USAGE + 1)", "greentrain {{Hostname}} {{modelName}}"),
                              Query(f"DCGM_FI_DEV_POWER_USAGE and on (UUID) {n.GPU_POWER.name}{N}",
                                    "dcgm {{Hostname}} {{modelName}}"),
                          ], "watt"), 12, 8)
    layout.add(timeseries("GPU temperature (dcgm-exporter)", "Temperature of the GPUs greentrain measures, from "
                          "dcgm-exporter, joined on UUID.",
                          [Query(f"DCGM_FI_DEV_GPU_TEMP and on (UUID) {n.GPU_POWER.name}{N}",
                                 "{{Hostname}} GPU {{gpu}} {{UUID}}")], "celsius"), 12, 8)


def _fleet(layout: Grid) -> None:
    layout.add(timeseries("Emissions rate by job", "gCO2eq per second of every job.",
                          [Query(f"sum by (job) (rate({n.EMISSIONS.name}[{RATE}]))", "{{job}}")],
                          "suffix: g/s", stack=True), 12, 8)
    layout.add(bargauge("Avoided emissions by job", "Emissions each job avoided versus running now, gCO2eq.",
                        [Query(f"sum by (job) ({n.JOB_EMISSIONS_AVOIDED.name})", "{{job}}")], "suffix: gCO2eq"), 6, 8)
    layout.add(timeseries("Jobs by state", "How many jobs run, pause or wait.",
                          [Query(f"sum by (state) ({n.JOB_STATE.name})", "{{state}}")], "short", stack=True), 6, 8)
    layout.add(timeseries("Grid carbon intensity by zone", "Actual and forecast intensity per zone, gCO2eq/kWh.",
                          [Query(f"max by (zone, kind) ({n.GRID_INTENSITY.name})", "{{zone}} {{kind}}")],
                          "suffix: g/kWh", step_after=True), 12, 8)
    layout.add(state_timeline("GPU readings", "Whether each GPU answers the monitor (red: failing).",
                              [Query(f"min by (instance, gpu) ({n.GPU_READING_OK.name}{N})", "{{instance}} GPU {{gpu}}")],
                              {1: ("ok", "green"), 0: ("failing", "red")}), 12, 8)


def node_dashboard() -> Json:
    """Build the node/fleet dashboard JSON."""
    dash = board(
        uid="greentrain-node", title="greentrain / nodes",
        description="Power and energy by node and GPU (joinable with dcgm-exporter), and all jobs of the fleet.",
        variables=[datasource_variable(),
                   query_variable("node", "Node", f"label_values({n.GPU_POWER.name}, instance)", multi=True)])
    layout = Grid(dash)
    for section in (_power, _dcgm, _fleet):
        section(layout)
    return to_json(dash)
