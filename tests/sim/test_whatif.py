"""``sim.whatif``: a recorded run replayed by the simulator behind ``greentrain simulate`` (not a second
model), priced at its own start, in its zone, with the shipped GPU profiles where its GPU has one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.codecarbon import CodeCarbonRun
from greentrain.policies import load_policy
from greentrain.signals.providers.static import StaticProvider
from greentrain.sim import PerfectForecaster, SimJob, TraceIndex, simulate
from greentrain.sim.sources import ProviderSource, TraceSource
from greentrain.sim.whatif import WhatIfSettings, match_profile, what_if

HEADER = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
          "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
          "Data Estimated,Data Estimation Method")
T0 = datetime(2022, 3, 1, tzinfo=UTC)


def write_trace(tmp_path: Path, values: list[float]) -> Path:
    rows = [HEADER] + [f"{(T0 + timedelta(hours=i)):%Y-%m-%d %H:%M:%S},GB,GB,GB,{v},{v},0,0,test,false,"
                       for i, v in enumerate(values)]
    path = tmp_path / "GB_test.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def recorded(start: datetime, hours: float, kwh: float, **fields: object) -> CodeCarbonRun:
    values: dict[str, object] = {"country_iso_code": "GBR"} | fields
    return CodeCarbonRun(row=2, ended_at=start + timedelta(hours=hours), duration_s=hours * 3600, energy_kwh=kwh,
                         **values)  # type: ignore[arg-type]


def replay(source, runs, settings=WhatIfSettings(), policy="carbon-aware"):
    points = getattr(source, "points", [])
    return what_if(runs, source, load_policy(policy), PerfectForecaster(points), settings)


def test_a_run_is_what_simulate_does_with_the_same_job(tmp_path: Path) -> None:
    trace_path = write_trace(tmp_path, [300, 300, 50, 50, 300, 300, 300, 300])
    source = TraceSource(trace_path)
    # Slack 2.5: the clean hours end an hour before the deadline (a wait keeps room for the rate it has not
    # measured yet, so a plan that would finish on the deadline's very edge runs at once instead).
    [item], skipped = replay(source, [recorded(T0, 2, 2.0)], WhatIfSettings(slack=2.5, resume_overhead_min=5))
    assert skipped == []
    job = SimJob.constant_power(work_h=2, deadline_h=5, power_kw=1.0, idle_power_kw=0.12, resume_overhead_min=5)
    [direct] = simulate(TraceIndex(source.points, source.name), [T0], job, load_policy("carbon-aware"),
                        PerfectForecaster(source.points))
    assert item.result.policy.emissions_g == pytest.approx(direct.policy.emissions_g)
    assert [(i.start, i.end) for i in item.result.policy.schedule] == [(i.start, i.end) for i in direct.policy.schedule]
    assert item.result.run_now.emissions_g == pytest.approx(2.0 * 300)  # as run: two hours at 300 g/kWh
    assert item.result.policy.emissions_g == pytest.approx(2.0 * 50)  # waits for the clean hours
    assert item.saving_g == pytest.approx(500) and item.delay_s == pytest.approx(2 * 3600)
    assert item.result.deadline_met and item.deadline == T0 + timedelta(hours=5)


def test_a_start_inside_an_hour_is_priced_from_that_minute(tmp_path: Path) -> None:
    source = TraceSource(write_trace(tmp_path, [100, 400, 400, 400]))
    run = recorded(T0 + timedelta(minutes=30), 1, 1.0)
    [item], _ = replay(source, [run], WhatIfSettings(gpu_profile="none"), policy="run-now")
    assert item.result.run_now.emissions_g == pytest.approx(0.5 * 100 + 0.5 * 400)
    assert item.result.policy.schedule[0].start == run.started_at


def test_held_waiting_counts_against_the_saving(tmp_path: Path) -> None:
    source = TraceSource(write_trace(tmp_path, [50, 900, 900, 900, 50, 900, 900]))
    [item], _ = replay(source, [recorded(T0, 2, 2.0)], WhatIfSettings(slack=3.0, resume_overhead_min=0))
    ledger = item.result.policy
    assert [(i.start.hour, i.end.hour) for i in ledger.schedule] == [(0, 1), (4, 5)]
    assert ledger.waiting_energy_kwh == pytest.approx(0.12 * 1.0 * 3)  # held idle at 12 % of the draw
    assert ledger.emissions_g == pytest.approx(50 + 50 + 0.36 * 900)
    assert item.saving_g == pytest.approx(950 - (100 + 0.36 * 900))
    assert item.delay_s == pytest.approx(3 * 3600)


def test_shipped_gpu_profiles_give_power_limits_where_the_gpu_has_one(tmp_path: Path) -> None:
    assert (match_profile("1 x NVIDIA A40"), match_profile("4 x Tesla V100-SXM2-32GB")) == ("a40", "v100")
    assert match_profile("Quadro RTX 6000") == "rtx6000" and match_profile("NVIDIA RTX 6000 Ada Generation") is None
    source = TraceSource(write_trace(tmp_path, [300] * 10))
    runs = [recorded(T0, 2, 2.0, gpu_model="1 x NVIDIA A40", gpu_energy_kwh=1.2),
            recorded(T0, 2, 2.0, gpu_model="1 x Tesla T4", gpu_energy_kwh=0.2), recorded(T0, 2, 2.0)]
    a40, t4, cpu = replay(source, runs, WhatIfSettings(slack=1.5), policy="energy-optimal")[0]
    assert a40.profile == "profile a40 (median of 6 workloads)" and a40.power_limits_w
    assert a40.result.policy.energy_j < a40.result.run_now.energy_j  # a lower limit saves energy on a flat grid
    assert t4.profile == "no profile for '1 x Tesla T4'" and t4.power_limits_w == []
    assert cpu.profile == "no profile (no GPU in the row)"
    [workload], _ = replay(source, runs[:1], WhatIfSettings(workload="cifar100/shufflenetv2"))
    assert workload.profile == "profile a40, cifar100/shufflenetv2"


def test_other_years_zones_and_short_deadlines(tmp_path: Path) -> None:
    source = TraceSource(write_trace(tmp_path, [100] * 24))
    later = recorded(datetime(2025, 3, 1, 2, tzinfo=UTC), 1, 1.0)
    france = recorded(T0, 1, 1.0, country_iso_code="FRA")
    nowhere = recorded(T0, 1, 1.0, country_iso_code="")
    done, skipped = replay(source, [later, france, nowhere])
    assert [s.reason for s in skipped] == ["zone FR, but the trace is for GB (--zone GB prices every run with it)"]
    shifted, unknown = done
    assert shifted.signal == "GB_test.csv, same date and hour in 2022"
    assert shifted.local(shifted.result.policy.finished_at) == later.ended_at  # reported in the run's calendar
    assert unknown.notes == ["no known country in the row: priced in the trace's zone GB"]
    [forced], none = replay(source, [france], WhatIfSettings(zone="GB"))
    assert none == [] and forced.zone == "GB"
    [short], _ = replay(source, [recorded(T0, 2, 2.0)], WhatIfSettings(deadline_h=1))
    assert short.notes == ["deadline 1.00 h is shorter than the run (2.00 h): runs now"]
    gap = recorded(T0 + timedelta(hours=22), 2, 2.0)
    assert "not 2022-03-01 22:00 to the deadline" in replay(source, [gap])[1][0].reason


def test_an_annual_average_cannot_do_better_than_run_now() -> None:
    source = ProviderSource(StaticProvider(), "static")
    [item], _ = replay(source, [recorded(T0, 3, 3.0)])
    assert item.signal.startswith("static annual average") and item.saving_g == pytest.approx(0, abs=1e-9)
