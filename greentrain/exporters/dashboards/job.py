"""The job dashboard: one training job's power, energy, carbon, state and policy actions.

Job-level series carry the training job's ``job`` label; device and signal
series come from the same endpoint, selected by ``$instance`` (the endpoints
serving ``$job``).
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
    prometheus_annotation,
    query_variable,
    stat,
    state_timeline,
    timeseries,
    to_json,
)

__all__ = ["job_dashboard"]

J = '{job="$job"}'
I = '{instance=~"$instance"}'
RATE = "$__rate_interval"


def _state_expr() -> str:
    # One series valued 1/2/3, so the timeline shows one row; max, not sum, across a job's node endpoints.
    parts = [f'{k} * max({n.JOB_STATE.name}{{job="$job",state="{s}"}})' for k, s in
             ((1, "running"), (2, "paused"), (3, "waiting"))]
    return " + ".join(parts)


def _stats(layout: Grid) -> None:
    layout.add(stat("Energy", "Energy attributed to the job so far (GPUs and CPU share).",
                    Query(f"sum({n.JOB_ENERGY.name}{J})"), "joule"), 5, 4)
    layout.add(stat("Emissions", "Emissions so far, gCO2eq: energy per interval x grid intensity then.",
                    Query(f"sum({n.EMISSIONS.name}{J})"), "suffix: gCO2eq", decimals=1), 5, 4)
    layout.add(stat("Avoided emissions", "Avoided versus running now at default settings, gCO2eq.",
                    Query(f"sum({n.JOB_EMISSIONS_AVOIDED.name}{J})"), "suffix: gCO2eq", decimals=1), 5, 4)
    layout.add(stat("Steps", "Training steps completed.", Query(f"sum({n.TRAINING_STEPS.name}{J})"), "short"), 4, 4)
    layout.add(stat("Deadline slack", "Deadline minus projected finish; negative means the deadline is at risk.",
                    Query(f"max({n.JOB_DEADLINE.name}{J}) - max({n.JOB_PROJECTED_FINISH.name}{J})"), "s"), 5, 4)


def _power_energy(layout: Grid) -> None:
    layout.add(timeseries("Power per GPU", "Board power of each GPU of the job with its enforced power limit, and "
                          "the whole job's power (GPUs and CPU share) as the rate of its energy counter.", [
        Query(f"{n.GPU_POWER.name}{I}", "GPU {{gpu}} power"),
        Query(f"{n.GPU_POWER_LIMIT.name}{I}", "GPU {{gpu}} limit"),
        Query(f"sum(rate({n.JOB_ENERGY.name}{J}[{RATE}]))", "job total"),
    ], "watt"), 12, 8)
    layout.add(timeseries("Energy", "Cumulative energy of the job.",
                          [Query(f"sum({n.JOB_ENERGY.name}{J})", "energy")], "joule"), 12, 8)


def _carbon(layout: Grid) -> None:
    layout.add(timeseries("Grid carbon intensity: actual vs forecast",
                          "Intensity the job runs on (actual or static) and what the forecast said for the same "
                          "interval, gCO2eq/kWh.",
                          [Query(f"{n.GRID_INTENSITY.name}{I}", "{{zone}} {{kind}} ({{provider}})")],
                          "suffix: g/kWh", step_after=True), 12, 8)
    layout.add(timeseries("Emissions and avoided emissions",
                          "Cumulative emissions of the job and emissions avoided versus running now at default "
                          "settings, gCO2eq.", [
                              Query(f"sum({n.EMISSIONS.name}{J})", "emitted"),
                              Query(f"sum({n.JOB_EMISSIONS_AVOIDED.name}{J})", "avoided"),
                          ], "suffix: gCO2eq"), 12, 8)


def _state_and_settings(layout: Grid) -> None:
    layout.add(state_timeline("Job state", "Running, paused (waiting out a dirty-grid period) or waiting to start.",
                              [Query(_state_expr(), "state")],
                              {1: ("running", "green"), 2: ("paused", "orange"), 3: ("waiting", "blue")}), 24, 4)
    layout.add(timeseries("Power limit", "Power limit the policy set for the job's GPUs, watts.",
                          [Query(f"max({n.JOB_POWER_LIMIT.name}{J})", "policy power limit")],
                          "watt", step_after=True), 12, 6)
    layout.add(state_timeline("Precision", "Training precision over time.",
                              [Query(f"max by (precision) ({n.JOB_PRECISION.name}{J})", "{{precision}}")],
                              {1: ("in use", "purple")}), 12, 6)
    layout.add(timeseries("Replicas", "Carbon scaling: the replica count the policy planned for each interval and "
                          "the count running (0 = paused or released); empty for a fixed-size job.", [
                              Query(f'max({n.JOB_REPLICAS.name}{{job="$job",kind="planned"}})', "planned"),
                              Query(f'max({n.JOB_REPLICAS.name}{{job="$job",kind="actual"}})', "actual"),
                          ], "short", step_after=True), 24, 6)


def _actions(layout: Grid) -> None:
    layout.add(timeseries("Policy actions", "Actions applied per interval, by kind.",
                          [Query(f"sum by (action) (increase({n.POLICY_ACTIONS.name}{J}[{RATE}]))", "{{action}}")],
                          "short", bars=True, stack=True), 12, 7)
    layout.add(bargauge("Policy actions (total)", "Actions applied since the job started.",
                        [Query(f"sum by (action) ({n.POLICY_ACTIONS.name}{J})", "{{action}}")], "short"), 6, 7)
    layout.add(timeseries("Carbon signal age", "Age of the carbon signal in use; a rising line means the provider "
                          "is failing and a fallback is used.",
                          [Query(f"{n.SIGNAL_AGE.name}{I}", "{{provider}}")], "s"), 6, 7)
    layout.add(timeseries("Throughput", "Training steps and tokens per second.", [
        Query(f"sum(rate({n.TRAINING_STEPS.name}{J}[{RATE}]))", "steps/s"),
        Query(f"sum(rate({n.TRAINING_TOKENS.name}{J}[{RATE}]))", "tokens/s"),
    ], "short"), 12, 7)
    layout.add(timeseries("SM clock per GPU", "Current SM clock of each GPU.",
                          [Query(f"{n.GPU_SM_CLOCK.name}{I}", "GPU {{gpu}}")], "hertz"), 12, 7)


def job_dashboard() -> Json:
    """Build the job dashboard JSON."""
    annotation = prometheus_annotation("Policy actions",
                                       f"sum by (action) (increase({n.POLICY_ACTIONS.name}{J}[1m])) > 0",
                                       title_format="{{action}}", text_format="policy action", step="60s",
                                       icon_color="orange")
    dash = board(
        uid="greentrain-job", title="greentrain / job",
        description="One training job: power, energy, carbon intensity, emissions, state and policy actions.",
        annotations=[annotation],
        variables=[
            datasource_variable(),
            query_variable("job", "Job", f"label_values({n.JOB_STATE.name}, job)"),
            query_variable("instance", "Endpoint", f'label_values({n.JOB_STATE.name}{{job="$job"}}, instance)',
                           multi=True),
        ])
    layout = Grid(dash)
    for section in (_stats, _power_energy, _carbon, _state_and_settings, _actions):
        section(layout)
    return to_json(dash)
