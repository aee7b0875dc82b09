"""Metric naming rules promtool does not check: base units, suffixes, label cardinality."""

from __future__ import annotations

import re

import pytest

from greentrain.exporters import names as n

pytestmark = pytest.mark.timeout(10)

# Non-base units and scaled prefixes; ``_per_kwh`` is allowed only as the denominator of grid intensity
# (gCO2eq/kWh is how every carbon data source publishes it), never as an energy quantity.
FORBIDDEN_UNIT = re.compile(
    r"_(mw|kw|mwh|kwh|wh|kj|mj|ms|us|ns|minutes?|hours?|mhz|ghz|khz|kg|tonnes?|percent|pct|celsius_milli|"
    r"milli\w*|micro\w*|kilo\w*|mega\w*|giga\w*)(_|$)")
ALLOWED_PER_UNIT = "_grams_per_kwh"
BASE_UNITS = ("joules", "watts", "hertz", "seconds", "grams", "grams_per_kwh", "timestamp_seconds")
HIGH_CARDINALITY = {"step", "steps", "timestamp", "time", "pid", "path", "run_id", "loss", "url", "key", "token"}


def test_forbidden_units_are_caught_by_the_lint() -> None:
    for bad in ("greentrain_gpu_power_mw", "greentrain_energy_kwh", "greentrain_step_ms", "x_megajoules_total",
                "greentrain_sm_clock_mhz"):
        assert FORBIDDEN_UNIT.search(bad), bad


@pytest.mark.parametrize("spec", n.METRICS, ids=lambda s: s.name)
def test_names_use_base_units(spec: n.MetricSpec) -> None:
    assert spec.name.startswith("greentrain_")
    assert re.fullmatch(r"[a-z_]+", spec.name.replace("UUID", ""))
    assert not FORBIDDEN_UNIT.search(spec.name.replace(ALLOWED_PER_UNIT, "")), spec.name


@pytest.mark.parametrize("spec", n.METRICS, ids=lambda s: s.name)
def test_counters_end_in_total_and_gauges_do_not(spec: n.MetricSpec) -> None:
    assert spec.name.endswith("_total") == (spec.type == "counter")
    if spec.type == "counter":
        stem = spec.family.removeprefix("greentrain_")
        assert stem.endswith(BASE_UNITS) or stem.endswith(("steps", "tokens", "actions", "refused", "errors", "migrations")), spec.name


@pytest.mark.parametrize("spec", n.METRICS, ids=lambda s: s.name)
def test_labels_are_bounded(spec: n.MetricSpec) -> None:
    assert not set(spec.labels) & HIGH_CARDINALITY
    assert len(spec.labels) <= 3
    assert spec.merge in ("sum", "max", "first")


def test_gpu_labels_match_dcgm_exporter() -> None:
    for spec in (n.GPU_ENERGY, n.GPU_POWER, n.GPU_POWER_LIMIT, n.GPU_SM_CLOCK, n.GPU_READING_OK):
        assert spec.labels[:2] == ("gpu", "UUID")


def test_architecture_names_are_all_present() -> None:
    required = {
        "greentrain_gpu_energy_joules_total": ("gpu", "UUID", "source"),
        "greentrain_gpu_power_watts": ("gpu", "UUID"),
        "greentrain_gpu_power_limit_watts": ("gpu", "UUID"),
        "greentrain_gpu_sm_clock_hertz": ("gpu", "UUID"),
        "greentrain_cpu_energy_joules_total": ("package", "source"),
        "greentrain_grid_carbon_intensity_grams_per_kwh": ("zone", "provider", "kind"),
        "greentrain_emissions_grams_total": ("job",),
        "greentrain_emissions_avoided_grams_total": ("job",),
        "greentrain_job_emissions_avoided_grams": ("job",),
        "greentrain_training_steps_total": ("job",),
        "greentrain_training_tokens_total": ("job",),
        "greentrain_job_state": ("job", "state"),
        "greentrain_policy_actions_total": ("job", "action"),
        "greentrain_carbon_signal_age_seconds": ("provider",),
        "greentrain_fleet_gpus": ("state",),
    }
    for name, labels in required.items():
        assert n.BY_NAME[name].labels == labels
    assert len(n.BY_NAME) == len(n.METRICS)
