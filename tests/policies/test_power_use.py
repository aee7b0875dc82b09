"""A policy declares power use by one attribute, ``Policy.power_use``, read by the loader and the job builder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.policies import (
    CarbonAwarePolicy,
    CompositePolicy,
    EnergyOptimalPolicy,
    ForecastOptimalPolicy,
    MaxSlowdownPolicy,
    Policy,
    ThresholdPolicy,
    policy_from_mapping,
)
from greentrain.job.hardware import policy_uses_power
from tests.plugin_dist import install_plugin

COOLEST = textwrap.dedent('''
    """A third-party power policy: always the lowest measured power limit. It says so with one attribute."""
    from greentrain.policies.base import Action, Decision, Policy


    class CoolestPolicy(Policy):
        name = "coolest"
        power_use = "power"

        def decide(self, snapshot, now):
            points = [p for p in snapshot.operating_points if p.power_limit_w is not None]
            if not points:
                return Decision(action=Action.RUN, reason="coolest: no measured points")
            point = min(points, key=lambda p: p.power_limit_w)
            return Decision(action=Action.RUN, power_limit_w=point.power_limit_w, reason="coolest")


    class PatientPolicy(Policy):
        name = "patient"

        def decide(self, snapshot, now):
            return Decision(action=Action.RUN, reason="patient")
''')


def test_the_builtins_declare_their_power_use() -> None:
    assert Policy.power_use == "none"
    assert {cls.power_use for cls in (ThresholdPolicy, ForecastOptimalPolicy)} == {"none"}
    assert {cls.power_use for cls in (EnergyOptimalPolicy, MaxSlowdownPolicy)} == {"power"}
    assert {cls.power_use for cls in (CarbonAwarePolicy, CompositePolicy)} == {"timing+power"}
    assert not policy_uses_power(ThresholdPolicy())
    assert policy_uses_power(EnergyOptimalPolicy()) and policy_uses_power(CarbonAwarePolicy())


def test_a_plugin_power_policy_needs_only_the_attribute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(monkeypatch, tmp_path / "site", "coolest", {"coolest": COOLEST},
                   {"greentrain.policies": {"coolest": "coolest:CoolestPolicy", "patient": "coolest:PatientPolicy"}})
    policy = policy_from_mapping({"policy": {"kind": "threshold"}, "power": {"kind": "coolest"}}, "p.toml")
    assert isinstance(policy, CompositePolicy) and policy.power.name == "coolest"
    assert policy_uses_power(policy)  # so power="auto" measures operating points for it
    with pytest.raises(ConfigError) as error:
        policy_from_mapping({"policy": {"kind": "threshold"}, "power": {"kind": "patient"}}, "p.toml")
    assert str(error.value) == ("p.toml: power.kind: 'patient' is not a power policy "
                                "(coolest, energy-optimal, max-slowdown)")


def test_a_policy_that_plans_power_refuses_a_power_table() -> None:
    with pytest.raises(ConfigError, match=r"p.toml: power: 'carbon-aware' already chooses the power limit"):
        policy_from_mapping({"policy": {"kind": "carbon-aware"}, "power": {"kind": "max-slowdown"}}, "p.toml")
    with pytest.raises(ConfigError, match=r"'carbon-aware' is not a power policy \(energy-optimal, max-slowdown\)"):
        policy_from_mapping({"policy": {"kind": "threshold"}, "power": {"kind": "carbon-aware"}}, "p.toml")
