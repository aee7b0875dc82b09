"""Every Prometheus metric greentrain exports: name, type, labels, help, rank merge.

One module so dashboards, rules, tests and the collector cannot drift apart.
Names use base units (joules, watts, hertz, seconds, grams) and ``_total`` on
counters. ``gpu`` and ``UUID`` are spelled as dcgm-exporter spells them, so a
query can join ``greentrain_gpu_power_watts`` with ``DCGM_FI_DEV_POWER_USAGE``
``on (UUID)``. No label carries a step number, timestamp or other unbounded
value.

``merge`` says how a node endpoint combines the same series reported by
several local ranks (see ``multiproc.py``): ``sum`` for what each rank accrues
on its own (its GPU's energy and emissions, its batch's tokens), ``max`` for
what every rank sees identically (a shared RAPL package, a step count that
advances in lock-step, a broadcast policy action), ``first`` for what only the
local leader knows (job state, the carbon signal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BUDGET_PROJECTED",
    "BUDGET_REMAINING",
    "BY_NAME",
    "CPU_ENERGY",
    "EMISSIONS",
    "EMISSIONS_AVOIDED",
    "JOB_EMISSIONS_AVOIDED",
    "EMISSIONS_UNPRICED_ENERGY",
    "EXPERT_IMBALANCE",
    "EXPERT_TOKENS",
    "EXPORTER_RANKS",
    "FLEET_DEADLINES_AT_RISK",
    "FLEET_EMISSIONS",
    "FLEET_GPUS",
    "FLEET_JOBS",
    "FLEET_METRICS",
    "FLEET_MIGRATIONS",
    "FLEET_PARTITION_GPUS",
    "FLEET_PARTITION_INTENSITY",
    "FLEET_PLAN_SECONDS",
    "FLEET_PLANNED_REMAINING",
    "FLEET_SLURM_ERRORS",
    "FLEET_ZONE_EMISSIONS",
    "GPU_ENERGY",
    "GPU_POWER",
    "GPU_POWER_LIMIT",
    "GPU_READING_OK",
    "GPU_SM_CLOCK",
    "GRID_INTENSITY",
    "JOB_ADVISED_ENERGY_CHANGE",
    "JOB_ADVISED_POWER_LIMIT",
    "JOB_ADVISED_PRECISION",
    "JOB_ADVISED_SM_CLOCK",
    "JOB_ADVISED_TIME_CHANGE",
    "JOB_DEADLINE",
    "JOB_ENERGY",
    "JOB_FINISHED",
    "JOB_POWER_LIMIT",
    "JOB_PRECISION",
    "JOB_PROJECTED_FINISH",
    "JOB_REPLICAS",
    "JOB_STATE",
    "JOB_STEP_ENERGY",
    "METRICS",
    "POLICY_ACTIONS",
    "POWER_CAP_REFUSED",
    "SETTINGS_UNRESTORED",
    "SIGNAL_AGE",
    "SIGNAL_STALE",
    "TRAINING_STEPS",
    "TRAINING_TOKENS",
    "MetricSpec",
    "WAITING_ENERGY",
    "WAITING_POWER",
]

MetricType = Literal["counter", "gauge"]
Merge = Literal["sum", "max", "first"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One exported metric family."""

    name: str
    """Full sample name; counters end in ``_total``."""
    type: MetricType
    labels: tuple[str, ...]
    help: str
    merge: Merge
    """How a node endpoint combines the same series from several local ranks."""

    @property
    def family(self) -> str:
        """Name without the ``_total`` suffix (what prometheus-client's families take)."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name


def _m(name: str, type_: MetricType, labels: tuple[str, ...], help_: str, merge: Merge) -> MetricSpec:
    return MetricSpec(name, type_, labels, help_, merge)


_GPU = ("gpu", "UUID")

GPU_ENERGY = _m("greentrain_gpu_energy_joules_total", "counter", (*_GPU, "source"),
                "GPU energy since the monitor started, joules (source: measured counter or integrated power).", "max")
GPU_POWER = _m("greentrain_gpu_power_watts", "gauge", _GPU, "GPU board power draw, watts.", "max")
GPU_POWER_LIMIT = _m("greentrain_gpu_power_limit_watts", "gauge", _GPU, "Enforced GPU power limit, watts.", "max")
GPU_SM_CLOCK = _m("greentrain_gpu_sm_clock_hertz", "gauge", _GPU, "Current GPU SM clock, hertz.", "max")
GPU_READING_OK = _m("greentrain_gpu_reading_ok", "gauge", _GPU,
                    "1 if the last reading of this GPU succeeded, 0 if it failed.", "max")
CPU_ENERGY = _m("greentrain_cpu_energy_joules_total", "counter", ("package", "source"),
                "Host CPU/DRAM energy since the monitor started, joules (measured RAPL or estimated).", "max")
GRID_INTENSITY = _m("greentrain_grid_carbon_intensity_grams_per_kwh", "gauge", ("zone", "provider", "kind"),
                    "Grid carbon intensity, gCO2eq/kWh (kind: actual, forecast for the current interval, static).",
                    "first")
SIGNAL_AGE = _m("greentrain_carbon_signal_age_seconds", "gauge", ("provider",),
                "Age of the carbon signal in use, seconds.", "first")
SIGNAL_STALE = _m("greentrain_carbon_signal_stale", "gauge", ("provider",),
                  "1 if the carbon signal in use is stale (provider failing, serving a fallback).", "first")
EMISSIONS = _m("greentrain_emissions_grams_total", "counter", ("job",),
               "Emissions attributed to the job, grams CO2eq (energy per interval x intensity of that interval).", "sum")
EMISSIONS_AVOIDED = _m("greentrain_emissions_avoided_grams_total", "counter", ("job",),
                       "Emissions avoided versus running now at default settings, net: what the job drew while "
                       "paused and its resume overheads count against it, grams CO2eq (the same figure as "
                       "greentrain_job_emissions_avoided_grams; kept for existing dashboards).", "sum")
JOB_EMISSIONS_AVOIDED = _m("greentrain_job_emissions_avoided_grams", "gauge", ("job",),
                           "Emissions avoided versus running now at default settings, net of the draw while paused "
                           "and the resume overheads, grams CO2eq (negative when waiting cost more than it saved).",
                           "sum")
EMISSIONS_UNPRICED_ENERGY = _m("greentrain_emissions_unpriced_energy_joules_total", "counter", ("job",),
                               "Job energy spent with no carbon intensity known (emissions unknown while > 0), "
                               "joules.", "sum")
WAITING_ENERGY = _m("greentrain_job_waiting_energy_joules_total", "counter", ("job",),
                    "Energy the job's held devices drew while it was paused or waiting, joules.", "sum")
WAITING_POWER = _m("greentrain_job_waiting_power_watts", "gauge", ("job",),
                   "What a pause is expected to draw (the policy plans with it): measured idle draw of the held "
                   "devices, 0 when released, or the user's figure, watts.", "max")
BUDGET_REMAINING = _m("greentrain_job_budget_remaining_grams", "gauge", ("job",),
                      "Carbon budget (max_emissions_g) minus what the job has emitted, grams CO2eq.", "sum")
BUDGET_PROJECTED = _m("greentrain_job_budget_projected_grams", "gauge", ("job",),
                      "Projected total emissions of the job (spent + remaining work at the measured rate and the "
                      "forecast), grams CO2eq.", "sum")
JOB_ENERGY = _m("greentrain_job_energy_joules_total", "counter", ("job",),
                "Energy attributed to the job (its GPUs and CPU share), joules.", "sum")
JOB_STEP_ENERGY = _m("greentrain_job_step_energy_joules", "gauge", ("job", "source"),
                     "Energy of the last training step, joules (source: measured, or interpolated for a step "
                     "shorter than two refreshes of the energy counter, 0.2 s).", "sum")
TRAINING_STEPS = _m("greentrain_training_steps_total", "counter", ("job",), "Training steps completed.", "max")
TRAINING_TOKENS = _m("greentrain_training_tokens_total", "counter", ("job",), "Training tokens processed.", "sum")
JOB_STATE = _m("greentrain_job_state", "gauge", ("job", "state"),
               "1 for the job's current state (running, paused, waiting), 0 for the others.", "first")
JOB_REPLICAS = _m("greentrain_job_replicas", "gauge", ("job", "kind"),
                  "Carbon scaling: the job's replica count, as planned by the policy for this interval and as "
                  "running now (kind: planned, actual; 0 = paused or released).", "first")
POLICY_ACTIONS = _m("greentrain_policy_actions_total", "counter", ("job", "action"),
                    "Policy actions applied, by action.", "max")
JOB_POWER_LIMIT = _m("greentrain_job_power_limit_watts", "gauge", ("job",),
                     "Power limit the policy set for the job's GPUs, watts.", "max")
JOB_PRECISION = _m("greentrain_job_precision_info", "gauge", ("job", "precision"),
                   "Training precision in use (value 1; the precision is the label).", "first")
JOB_DEADLINE = _m("greentrain_job_deadline_timestamp_seconds", "gauge", ("job",),
                  "Job deadline, Unix time seconds.", "first")
JOB_PROJECTED_FINISH = _m("greentrain_job_projected_finish_timestamp_seconds", "gauge", ("job",),
                          "Projected finish under the current plan, Unix time seconds.", "first")
JOB_FINISHED = _m("greentrain_job_finished_timestamp_seconds", "gauge", ("job",),
                  "When the job's exporter stopped, Unix time seconds (pushgateway final push).", "first")
JOB_ADVISED_POWER_LIMIT = _m("greentrain_job_advised_power_limit_watts", "gauge", ("job",),
                             "Advisory mode: power limit the policy advised (not applied), watts.", "max")
JOB_ADVISED_SM_CLOCK = _m("greentrain_job_advised_sm_clock_hertz", "gauge", ("job",),
                          "Advisory mode: top of the SM clock range the policy advised (not applied), hertz.", "max")
JOB_ADVISED_PRECISION = _m("greentrain_job_advised_precision_info", "gauge", ("job", "precision"),
                           "Advisory mode: precision the policy advised (value 1; not switched to).", "first")
JOB_ADVISED_ENERGY_CHANGE = _m("greentrain_job_advised_energy_change_ratio", "gauge", ("job",),
                               "Advisory mode: estimated relative change of energy per unit of work at the "
                               "advised power limit (-0.1 = 10 % less).", "first")
JOB_ADVISED_TIME_CHANGE = _m("greentrain_job_advised_time_change_ratio", "gauge", ("job",),
                             "Advisory mode: estimated relative change of running time at the advised power "
                             "limit (0.05 = 5 % longer).", "first")
SETTINGS_UNRESTORED = _m("greentrain_gpu_settings_unrestored", "gauge", ("job",),
                         "GPU settings the job changed whose restore failed or is still pending after exit.", "sum")
POWER_CAP_REFUSED = _m("greentrain_power_cap_refused_total", "counter", ("job",),
                       "Power-limit or clock changes refused for lack of privilege.", "sum")
EXPERT_TOKENS = _m("greentrain_moe_expert_tokens_total", "counter", ("job", "expert"),
                   "Mixture of experts: tokens the routers sent to each expert (index), summed over blocks and "
                   "ranks.", "max")
EXPERT_IMBALANCE = _m("greentrain_moe_expert_imbalance_ratio", "gauge", ("job",),
                      "Mixture of experts: the busiest expert's tokens over the mean in the last step, worst "
                      "block (1 = balanced).", "max")
EXPORTER_RANKS = _m("greentrain_exporter_ranks", "gauge", ("job",),
                    "Local ranks whose metrics this node endpoint aggregates.", "first")

# The fleet controller (``greentrain fleet run``): one series set per controller, labelled by partition or state.
FLEET_GPUS = _m("greentrain_fleet_gpus", "gauge", ("state",),
                "GPUs of the managed partitions: in_use (managed and other jobs running now) or capacity (on "
                "nodes that are up).", "first")
FLEET_JOBS = _m("greentrain_fleet_jobs", "gauge", ("state",),
                "Managed jobs by state: running, pausing (signalled to checkpoint), paused (ran before, waits "
                "now), waiting (never started).", "first")
FLEET_EMISSIONS = _m("greentrain_fleet_emissions_grams_total", "counter", ("kind",),
                     "Emissions of the managed jobs, estimated (GPUs x power per GPU x grid intensity), grams "
                     "CO2eq: kind=actual for what ran, kind=planned for what the plan said would run over the same "
                     "intervals.", "first")
FLEET_PLANNED_REMAINING = _m("greentrain_fleet_planned_remaining_grams", "gauge", (),
                             "Emissions the current plan expects from the managed jobs' remaining work, grams "
                             "CO2eq (forecast).", "first")
FLEET_DEADLINES_AT_RISK = _m("greentrain_fleet_deadlines_at_risk", "gauge", (),
                             "Managed jobs the current plan cannot finish by their deadline (capacity or time).",
                             "first")
FLEET_SLURM_ERRORS = _m("greentrain_fleet_slurm_errors_total", "counter", (),
                        "Slurm commands that failed (each left its job as Slurm had it, with a note in the "
                        "journal).", "first")
FLEET_PLAN_SECONDS = _m("greentrain_fleet_plan_seconds", "gauge", (),
                        "CPU time of the latest fleet plan, seconds.", "first")

# Per partition (each on its grid zone): bounded by the partitions the controller manages (``--partition``).
FLEET_PARTITION_GPUS = _m("greentrain_fleet_partition_gpus", "gauge", ("partition", "zone", "state"),
                          "GPUs of one managed partition: planned (the current plan runs managed jobs on them "
                          "now), running (managed jobs running there now), capacity (on nodes that are up).",
                          "first")
FLEET_PARTITION_INTENSITY = _m("greentrain_fleet_partition_carbon_intensity_grams_per_kwh", "gauge",
                               ("partition", "zone"),
                               "Grid carbon intensity of the current hour on the partition's zone, as the plan "
                               "used it, gCO2eq/kWh.", "first")
FLEET_MIGRATIONS = _m("greentrain_fleet_migrations_total", "counter", ("from_partition", "to_partition"),
                      "Started managed jobs seen on another partition than in the previous round (their "
                      "checkpoint moved).", "first")
FLEET_ZONE_EMISSIONS = _m("greentrain_fleet_zone_emissions_grams_total", "counter", ("zone",),
                          "Emissions of the managed jobs that ran on the zone's partitions, estimated (GPUs x power "
                          "per GPU x the zone's intensity), grams CO2eq; summed over zones, the fleet's "
                          "kind=actual emissions.", "first")

FLEET_METRICS: tuple[MetricSpec, ...] = (
    FLEET_GPUS, FLEET_JOBS, FLEET_EMISSIONS, FLEET_PLANNED_REMAINING, FLEET_DEADLINES_AT_RISK, FLEET_SLURM_ERRORS,
    FLEET_PLAN_SECONDS, FLEET_PARTITION_GPUS, FLEET_PARTITION_INTENSITY, FLEET_MIGRATIONS, FLEET_ZONE_EMISSIONS,
)

METRICS: tuple[MetricSpec, ...] = (
    GPU_ENERGY, GPU_POWER, GPU_POWER_LIMIT, GPU_SM_CLOCK, GPU_READING_OK, CPU_ENERGY,
    GRID_INTENSITY, SIGNAL_AGE, SIGNAL_STALE,
    EMISSIONS, EMISSIONS_AVOIDED, JOB_EMISSIONS_AVOIDED, EMISSIONS_UNPRICED_ENERGY, WAITING_ENERGY, WAITING_POWER,
    BUDGET_REMAINING, BUDGET_PROJECTED, JOB_ENERGY, JOB_STEP_ENERGY, TRAINING_STEPS, TRAINING_TOKENS, JOB_STATE, POLICY_ACTIONS,
    JOB_REPLICAS, JOB_POWER_LIMIT, JOB_PRECISION, JOB_DEADLINE, JOB_PROJECTED_FINISH, JOB_FINISHED,
    SETTINGS_UNRESTORED, POWER_CAP_REFUSED, EXPORTER_RANKS, EXPERT_TOKENS, EXPERT_IMBALANCE,
    JOB_ADVISED_POWER_LIMIT, JOB_ADVISED_SM_CLOCK, JOB_ADVISED_PRECISION, JOB_ADVISED_ENERGY_CHANGE,
    JOB_ADVISED_TIME_CHANGE,
    *FLEET_METRICS,
)
BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in METRICS}
