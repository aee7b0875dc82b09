"""Simulator baselines and the power oracle against hand-computed small cases."""

from __future__ import annotations

import pytest

from greentrain.device.profiles import ProfilePoint
from greentrain.policies.slot_planner import Mode
from greentrain.sim import SimJob, TraceIndex, best_window, oracle, run_now
from tests.policies.helpers import HOUR, T0, points

pytestmark = pytest.mark.timeout(60)


KW = (Mode(1.0, 1000.0),)


def job(work_h, deadline_h, overhead_min=30.0, modes=KW):
    return SimJob(work_s=work_h * 3600, deadline_s=deadline_h * 3600, modes=modes,
                  resume_overhead_s=overhead_min * 60, profiled=len(modes) > 1)


TRACE = TraceIndex(points([5, 1, 9, 1, 5, 2, 2, 2]))


def test_run_now_by_hand():
    ledger = run_now(TRACE, T0, job(2.5, 5))
    assert ledger.emissions_g == pytest.approx(5 + 1 + 4.5)  # 1 kW: 5 + 1 + half of 9
    assert ledger.energy_kwh == pytest.approx(2.5)
    assert ledger.finished_at == T0 + 2.5 * HOUR


def test_best_window_by_hand():
    ledger, start = best_window(TRACE, T0, job(2, 5))
    # Windows of 2 h ending by hour 5: [5,1]=6 [1,9]=10 [9,1]=10 [1,5]=6 -> first, earliest
    assert start == T0 and ledger.emissions_g == pytest.approx(6)
    ledger, start = best_window(TRACE, T0, job(2, 8))
    assert start == T0 + 5 * HOUR and ledger.emissions_g == pytest.approx(4)


def test_oracle_by_hand_with_resume_overhead():
    ledger = oracle(TRACE, T0, job(2, 5))
    # hour 1 (1 g) + resume in hour 3 (0.5 h overhead + 0.5 h work: 1 g) + 0.5 h in hour 4 (2.5 g)
    assert ledger.emissions_g == pytest.approx(4.5)
    assert ledger.resumes == 1
    assert [(i.start, i.end) for i in ledger.schedule] == [(T0 + HOUR, T0 + 2 * HOUR), (T0 + 3 * HOUR, T0 + 4.5 * HOUR)]


def test_power_oracle_by_hand():
    # Full speed 1 kW at 300 W limit; 0.5 speed at 0.4 kW (150 W limit). 2 h of work in 3 h of [1, 10, 10]:
    # hour 0 at full speed (1 g), then 1 h of work as 2 h at half speed (0.8 kWh x 10 = 8 g).
    modes = (Mode(1.0, 1000.0, 300.0), Mode(0.5, 400.0, 150.0))
    trace = TraceIndex(points([1, 10, 10, 10]))
    ledger = oracle(trace, T0, job(2, 3, modes=modes))
    assert ledger.emissions_g == pytest.approx(9.0)
    assert [i.power_limit_w for i in ledger.schedule] == [300.0, 150.0]
    assert ledger.energy_kwh == pytest.approx(1.8)
    # With a 4 h deadline everything can run at half speed in the cheap... no: hour 0 is the only clean
    # one; 4 h: full in hour 0 (1 g) + 1 h of work at half speed over hours 1-2 (8 g); same 9 g.
    assert oracle(trace, T0, job(2, 4, modes=modes)).emissions_g == pytest.approx(9.0)


def test_power_oracle_uses_slow_mode_on_a_flat_grid():
    modes = (Mode(1.0, 1000.0, 300.0), Mode(0.5, 400.0, 150.0))
    trace = TraceIndex(points([10] * 4))
    # 1 h of work in 2 h: half speed for 2 h (0.8 kWh) beats full speed for 1 h (1 kWh).
    assert oracle(trace, T0, job(1, 2, modes=modes)).emissions_g == pytest.approx(8.0)


def test_oracle_falls_back_to_run_now_when_the_deadline_is_impossible():
    assert oracle(TRACE, T0, job(3, 2)).emissions_g == pytest.approx(run_now(TRACE, T0, job(3, 2)).emissions_g)


def test_profile_modes_average_duplicate_limits_and_scale_by_gpus():
    from greentrain.device.profiles import GPUProfile
    from greentrain.sim import profile_modes

    rows = {("d/n", 8): [ProfilePoint(250, 10.0, 200.0), ProfilePoint(250, 12.0, 220.0),
                         ProfilePoint(150, 15.0, 140.0)]}
    modes = profile_modes(GPUProfile("x", rows, "test"), "d/n", gpus=4)
    assert modes[0] == Mode(1.0, 840.0, 250)
    assert modes[1].speed == pytest.approx(11.0 / 15.0) and modes[1].power_w == pytest.approx(560.0)
