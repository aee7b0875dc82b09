"""Policy TOML files and presets: loading, validation errors, shipped copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.policies import (
    PRESETS,
    CompositePolicy,
    Policy,
    PolicySettings,
    load_policy,
)
from greentrain.policies.carbon_aware import CarbonAwarePolicy

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
PACKAGED = REPO / "greentrain" / "policies" / "presets"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_required_presets_exist_and_load():
    for name in ("run-now", "carbon-aware", "deadline-strict", "threshold", "best-window", "forecast-optimal"):
        assert name in PRESETS
    for name in PRESETS:
        policy = load_policy(name)
        assert isinstance(policy, Policy)
        assert isinstance(policy.settings, PolicySettings)


def test_top_level_presets_are_identical_copies():
    top = {p.name: p.read_bytes() for p in (REPO / "policies").glob("*.toml")}
    packaged = {p.name: p.read_bytes() for p in PACKAGED.glob("*.toml")}
    assert packaged and top == packaged


def test_file_with_settings_and_power(tmp_path):
    path = write(tmp_path, """
[policy]
kind = "forecast-optimal"
safety_z = 1
[power]
kind = "max-slowdown"
max_slowdown = 0.2
[settings]
pause_mode = "suspend"
resume_overhead_s = 120
deadline_policy = "best-effort"
""")
    policy = load_policy(path)
    assert isinstance(policy, CompositePolicy)
    assert policy.timing.config.safety_z == 1.0
    assert policy.power.config.max_slowdown == 0.2
    assert policy.settings == PolicySettings(pause_mode="suspend", resume_overhead_s=120.0,
                                             deadline_policy="best-effort")


def test_budget_shift_setting_loads(tmp_path):
    path = write(tmp_path, '[policy]\nkind = "run-now"\n[settings]\nmax_emissions_g = 500\non_budget = "shift"\n')
    settings = load_policy(path).settings
    assert (settings.on_budget, settings.max_emissions_g) == ("shift", 500.0)


def test_policy_instance_passes_through():
    policy = CarbonAwarePolicy()
    assert load_policy(policy) is policy


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[policy]\nkind = \"threshold\"\npercentil = 3\n", "policy.percentil: unknown key"),
        ("[policy]\nkind = \"threshold\"\npercentile = \"high\"\n", "policy.percentile: expected float"),
        ("[policy]\nkind = \"threshold\"\npercentile = 300\n", "policy.percentile: must be in"),
        ("[policy]\nkind = \"threshold\"\nsafety_z = true\n", "policy.safety_z: expected float"),
        ("[policy]\nsafety_z = 1\n", "policy.kind: required"),
        ("[policy]\nkind = \"warp-drive\"\n", "policy.kind: unknown policy 'warp-drive'"),
        ("kind = \"run-now\"\n", "kind: unknown table"),
        ("[settings]\npause_mode = \"checkpoint\"\n", "missing table [policy]"),
        ("[policy]\nkind = \"run-now\"\n[settings]\npause_mode = \"hibernate\"\n", "settings.pause_mode"),
        ("[policy]\nkind = \"run-now\"\n[settings]\ndeadline_policy = \"maybe\"\n", "settings.deadline_policy"),
        ("[policy]\nkind = \"run-now\"\n[settings]\non_budget = \"shuffle\"\n", "settings.on_budget: 'shuffle'"),
        ("[policy]\nkind = \"carbon-aware\"\n[power]\nkind = \"energy-optimal\"\n", "power: 'carbon-aware'"),
        ("[policy]\nkind = \"threshold\"\n[power]\nkind = \"best-window\"\n", "power.kind: 'best-window' is not"),
        ("[policy\nkind = 1\n", "invalid TOML"),
    ],
)
def test_bad_files_name_file_key_and_reason(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_unknown_preset_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="unknown policy or preset 'greenest'.*carbon-aware"):
        load_policy("greenest")
    with pytest.raises(ConfigError, match="cannot read policy file"):
        load_policy(tmp_path / "absent.toml")
