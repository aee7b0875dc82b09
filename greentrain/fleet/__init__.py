"""Many jobs, one cluster's capacity: the fleet plan and its simulator.

``plan_fleet`` decides, for every managed job of a cluster at once, which run
now and which wait, for the least total emissions with every partition's
capacity and every deadline kept, restart overheads counted; it is an LP/MILP
solved by HiGHS (scipy). ``simulate_fleet`` replays a jobs file against a
recorded carbon trace under the plan or a baseline, with causal forecasts.
The Slurm controller that acts on the plan lives in
``greentrain.integrations.fleet_controller``; this package never reaches into
the training engine.
"""

from greentrain.fleet.bound import Bound, offline_bound
from greentrain.fleet.jobs import FleetJob, RunOption, load_jobs, parse_jobs
from greentrain.fleet.model import FleetPlan, JobPlan, JobStatus, Partition, PlannerConfig
from greentrain.fleet.fleet_planner import plan_fleet
from greentrain.fleet.simulate import Cluster, SimResult, simulate_fleet

__all__ = [
    "Bound",
    "Cluster",
    "FleetJob",
    "FleetPlan",
    "JobPlan",
    "JobStatus",
    "Partition",
    "PlannerConfig",
    "RunOption",
    "SimResult",
    "load_jobs",
    "offline_bound",
    "parse_jobs",
    "plan_fleet",
    "simulate_fleet",
]
