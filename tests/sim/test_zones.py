"""One job across zones: it moves at a pause when the move pays, stays when the overhead is larger than the
gain, and meets the deadline with the migration overhead counted (``sim/zones.py``, ``sim/placement.py``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from greentrain.policies import load_policy
from greentrain.signals.base import IntensityPoint, Kind
from greentrain.sim import PerfectForecaster, SimJob, TraceIndex, simulate_run
from greentrain.sim.placement import ZoneOutlook, choose_zone
from greentrain.sim.zones import simulate_zones, simulate_zones_run
from greentrain.signals.trace import load_trace
from tests.conftest import find_trace

pytestmark = pytest.mark.timeout(120)

T0 = datetime(2022, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def points(zone: str, values: list[float], first: datetime = T0) -> list[IntensityPoint]:
    return [IntensityPoint(start=first + i * HOUR, end=first + (i + 1) * HOUR, intensity_g_per_kwh=v,
                           kind=Kind.ACTUAL, provider="test", zone=zone)
            for i, v in enumerate(values)]


class LateNews:
    """The truth, except for ``zone`` before ``until``: a flat wrong guess (a forecast that changes)."""

    horizon_independent = False

    def __init__(self, trace: list[IntensityPoint], wrong: float | None = None,
                 until: datetime = T0 + 2 * HOUR) -> None:
        self.truth, self.wrong, self.until = PerfectForecaster(trace), wrong, until

    def forecast(self, history, now, horizon_h=72):
        ahead = self.truth.forecast(history, now, horizon_h)
        if self.wrong is not None and now < self.until:
            return [replace(p, intensity_g_per_kwh=self.wrong) for p in ahead]
        return ahead


# Home A is clean for two hours, then dirty; B looks dirty at the start (its forecast is wrong) and turns
# out clean from hour 4: the job starts at home, pauses through A's worst hours, and may resume in B.
A = [100, 100, 900, 900] + [600] * 8


def run(b_late: float, migration_min: float, deadline_h: float = 10.0):
    b = [300] * 4 + [b_late] * 8
    traces = {"A": TraceIndex(points("A", A), "A"), "B": TraceIndex(points("B", b), "B")}
    forecasters = {"A": LateNews(traces["A"].points), "B": LateNews(traces["B"].points, wrong=700)}
    job = replace(SimJob.constant_power(work_h=4, deadline_h=deadline_h, power_kw=1.0, resume_overhead_min=5),
                  migration_overhead_s=migration_min * 60)
    return simulate_zones_run(traces, T0, job, load_policy("forecast-optimal"), forecasters)


def test_moves_to_the_clean_zone_when_the_move_pays():
    result = run(b_late=50, migration_min=15)
    ledger = result.ledger
    assert [(i.zone, i.start.hour) for i in ledger.schedule] == [("A", 0), ("B", 4)]
    assert ledger.migrations == 1 and ledger.resumes == 0
    assert result.deadline_met
    # 2 h at home at 100 g/kWh; then 15 min of migration and 2 h of work in B at 50 (1 kW).
    assert ledger.emissions_by_zone_g == pytest.approx({"A": 200.0, "B": 50 * 2.25})
    assert ledger.finished_at == T0 + timedelta(hours=6, minutes=15)


@pytest.mark.parametrize(("migration_min", "moves"), [(50, False), (0, True)])
def test_stays_when_the_overhead_is_larger_than_the_gain(migration_min, moves):
    # B saves 20 g/kWh over 2 h (40 g); 50 min of migration at 580 costs 483 g against 50 g of resume at home.
    ledger = run(b_late=580, migration_min=migration_min).ledger
    assert ledger.migrations == int(moves)
    assert {i.zone for i in ledger.schedule} == ({"A", "B"} if moves else {"A"})


@pytest.mark.parametrize("deadline_h", [6.1, 6.2, 6.3, 8.0])
def test_deadline_met_with_the_migration_overhead_counted(deadline_h):
    result = run(b_late=50, migration_min=15, deadline_h=deadline_h)
    assert result.deadline_met and result.ledger.migrations == 1
    if deadline_h < 6.25:
        # Resuming in B at hour 4 would need 15 min + 2 h: the guard, counting the migration, resumes at 3.
        assert result.ledger.schedule[-1].start == T0 + 3 * HOUR


def test_placement_prices_overhead_and_deadline():
    def outlook(zone, now_g, later_g, overhead_min):
        [now] = points(zone, [now_g])
        return ZoneOutlook(zone, now, points(zone, [later_g] * 5, T0 + HOUR), overhead_min * 60.0)

    kw = {"now": T0, "deadline": T0 + 6 * HOUR, "need_s": 2 * 3600.0, "power_w": 1000.0}
    # In place: 5 min at 600 + 2 h at 600; B: 15 min + 2 h at 50.
    placed = choose_zone([outlook("A", 600, 600, 5), outlook("B", 50, 50, 15)], "A", **kw)
    assert placed.zone == "B"
    assert placed.expected_g == pytest.approx({"A": 600 * (2 + 5 / 60), "B": 50 * 2.25})
    assert choose_zone([outlook("A", 600, 600, 5), outlook("B", 590, 590, 55)], "A", **kw).zone == "A"
    tight = {**kw, "deadline": T0 + timedelta(hours=2, minutes=10)}  # B's 2 h 15 min do not fit
    assert choose_zone([outlook("A", 600, 600, 5), outlook("B", 50, 50, 15)], "A", **tight).zone == "A"


def test_one_zone_replays_as_the_one_trace_simulator():
    trace = TraceIndex(load_trace(find_trace("DE-LU_2022_hourly.csv")), "DE-LU")
    start = datetime(2022, 3, 7, tzinfo=UTC)
    job = SimJob.constant_power(work_h=6, deadline_h=30, idle_power_kw=0.12)
    policy = load_policy("carbon-aware")
    forecaster = PerfectForecaster(trace.points)
    single = simulate_run(trace, start, job, policy, forecaster).ledger
    pinned = simulate_zones_run({"DE-LU": trace}, start, job, policy, {"DE-LU": forecaster}).ledger
    assert pinned.emissions_g == pytest.approx(single.emissions_g)
    assert [(i.start, i.end) for i in pinned.schedule] == [(i.start, i.end) for i in single.schedule]
    assert pinned.migrations == 0 and pinned.emissions_by_zone_g == pytest.approx({"DE-LU": single.emissions_g})


def test_baselines_beside_the_run():
    b = [300] * 4 + [50] * 8
    traces = {"A": TraceIndex(points("A", A), "A"), "B": TraceIndex(points("B", b), "B")}
    forecasters = {"A": PerfectForecaster(traces["A"].points), "B": PerfectForecaster(traces["B"].points)}
    job = SimJob.constant_power(work_h=4, deadline_h=10, idle_power_kw=0.0)
    [result] = simulate_zones(traces, [T0], job, load_policy("forecast-optimal"), forecasters)
    # With the truth at the start the job starts in B (nothing to move yet): 4 h at 50.
    assert {i.zone for i in result.run.ledger.schedule} == {"B"} and result.run.ledger.migrations == 0
    assert result.run.ledger.emissions_g == pytest.approx(200.0)
    assert result.greenest_zone == "A"  # 100 < 300 at the start hour
    assert result.stay_home.ledger.emissions_g == pytest.approx(result.greenest_at_start.ledger.emissions_g)
    assert result.stay_home.ledger.emissions_g > 1000
    assert result.oracle_by_zone["B"].emissions_g == pytest.approx(200.0)
