"""``greentrain demo``: the whole loop on one laptop.

The reference model trains on CPU on real text under the carbon-aware policy
while a real carbon trace (shipped in the package) replays at a speed-up: the
job waits for a clean window, pauses through a dirty one, resumes from its
checkpoint without losing a step and finishes before its deadline, with the
Prometheus exporter serving and an HTML report at the end.
"""

from greentrain.demo.runner import (
    DemoRunner,
    SegmentEnd,
    demo_config,
    demo_policy,
    measure_step_time_s,
)
from greentrain.demo.scenario import (
    ATTRIBUTION,
    DEFAULT_STARTS,
    Scenario,
    default_scenario,
    find_scenarios,
)
from greentrain.demo.state import DemoState, load_demo_state, save_demo_state
from greentrain.demo.summary import DemoSummary, render_summary, summarize_run

__all__ = [
    "ATTRIBUTION",
    "DEFAULT_STARTS",
    "DemoRunner",
    "DemoState",
    "DemoSummary",
    "Scenario",
    "SegmentEnd",
    "default_scenario",
    "demo_config",
    "demo_policy",
    "find_scenarios",
    "load_demo_state",
    "measure_step_time_s",
    "render_summary",
    "save_demo_state",
    "summarize_run",
]
