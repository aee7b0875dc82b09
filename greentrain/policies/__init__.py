"""Policies: pure ``decide(snapshot, now) -> Decision`` functions and their TOML loader.

Built-in kinds: ``run-now``, ``threshold``, ``best-window``, ``forecast-optimal``,
``carbon-aware`` (timing × power), ``energy-optimal``, ``max-slowdown``.
Kinds are the ``greentrain.policies`` plugin family (``policy_kinds()``).
``load_policy(spec)`` takes a preset name (``PRESETS``), a TOML path or a Policy.
"""

from greentrain.policies.base import Action, Decision, OperatingPoint, Policy, Snapshot
from greentrain.policies.loader import (
    PRESETS,
    load_policy,
    policy_from_mapping,
    policy_kinds,
)
from greentrain.policies.carbon_aware import CarbonAwarePolicy
from greentrain.policies.forecast_optimal import ForecastOptimalPolicy
from greentrain.policies.power import (
    CompositePolicy,
    EnergyOptimalPolicy,
    MaxSlowdownPolicy,
)
from greentrain.policies.settings import PolicySettings
from greentrain.policies.timing import BestWindowPolicy, RunNowPolicy, ThresholdPolicy

__all__ = [
    "PRESETS",
    "Action",
    "BestWindowPolicy",
    "CarbonAwarePolicy",
    "CompositePolicy",
    "Decision",
    "EnergyOptimalPolicy",
    "ForecastOptimalPolicy",
    "MaxSlowdownPolicy",
    "OperatingPoint",
    "Policy",
    "PolicySettings",
    "RunNowPolicy",
    "Snapshot",
    "ThresholdPolicy",
    "load_policy",
    "policy_from_mapping",
    "policy_kinds",
]
