"""Skill by hours ahead against hand-computed errors, the blend weights, and what the archive is asked."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from greentrain.errors import ConfigError
from greentrain.signals.archive.store import ForecastArchive
from greentrain.signals.archive.issued import IssuedForecasts
from greentrain.signals.forecast.skill import actual_table, blend_weights, horizon_errors
from greentrain.signals.archive.skillreport import COMPUTED_OWN, zone_skill

pytestmark = pytest.mark.timeout(60)

S0 = int(datetime(2022, 3, 1, tzinfo=UTC).timestamp())
H = 3600


def test_errors_by_horizon_match_a_hand_computation() -> None:
    forecast = np.array([[110.0, 90.0], [100.0, np.nan], [80.0, 130.0]])
    actual = np.array([[100.0, 100.0], [100.0, 50.0], [100.0, 100.0]])
    errors = horizon_errors(forecast, actual)
    # 1 h ahead: errors +10, 0, -20; 2 h ahead: -10, (none), +30.
    assert errors.count.tolist() == [3, 2]
    assert errors.bias_g_per_kwh.tolist() == pytest.approx([-10 / 3, 10.0])
    assert errors.mae_g_per_kwh.tolist() == pytest.approx([10.0, 20.0])
    assert errors.rmse_g_per_kwh.tolist() == pytest.approx([np.sqrt(500 / 3), np.sqrt(500)])
    assert errors.mape.tolist() == pytest.approx([0.1, 0.2])


def test_blend_weight_is_the_least_squares_combination() -> None:
    rng = np.random.default_rng(3)
    actual = rng.uniform(100, 300, size=(400, 1))
    provider = actual + rng.choice([-1.0, 1.0], size=(400, 1)) * 10.0  # error spread 10
    own = actual + rng.choice([-1.0, 1.0], size=(400, 1)) * 20.0       # error spread 20, independent
    e_p, e_o = provider - actual, own - actual
    expected = ((e_o**2).sum() - (e_p * e_o).sum()) / ((e_p**2).sum() + (e_o**2).sum() - 2 * (e_p * e_o).sum())
    weight = blend_weights(provider, own, actual, pool_h=0)
    assert weight[0] == pytest.approx(expected) and 0.7 < weight[0] < 0.9  # 400 / (100 + 400) = 0.8 in expectation
    assert blend_weights(actual + 0.0, own, actual, pool_h=0)[0] == 1.0  # an exact provider is trusted fully
    assert blend_weights(provider, actual + 0.0, actual, pool_h=0)[0] == 0.0
    assert blend_weights(provider[:10], own[:10], actual[:10], pool_h=0)[0] == 1.0  # too few pairs: as issued


def test_issued_table_takes_the_latest_forecast_at_or_before_each_moment() -> None:
    # Issued at 00:00 for 01:00-03:00, and at 01:30 for 02:00-04:00.
    issued = IssuedForecasts(np.array([S0] * 3 + [S0 + 5400] * 3),
                             np.array([S0 + H, S0 + 2 * H, S0 + 3 * H, S0 + 2 * H, S0 + 3 * H, S0 + 4 * H]),
                             np.array([10.0, 20.0, 30.0, 21.0, 31.0, 41.0]), provider="p", zone="Z")
    table = issued.table(np.array([S0 - 1, S0, S0 + 5399, S0 + 5400, S0 + 2 * H]), 3)
    assert np.isnan(table[0]).all()                          # nothing issued yet
    assert table[1].tolist() == [10.0, 20.0, 30.0]           # at 00:00: its own issue
    assert table[2, :2].tolist() == [20.0, 30.0] and np.isnan(table[2, 2])  # a second before 01:30: still 00:00's
    assert table[3].tolist() == [21.0, 31.0, 41.0]           # from 01:30 on, the newer one
    assert table[4, :2].tolist() == [31.0, 41.0] and np.isnan(table[4, 2])
    assert np.isnan(issued.table(np.array([S0 + 2 * H]), 2, max_age_s=1799)).all()  # 30 min old: a gap here


def test_zone_skill_scores_each_source_by_hand(tmp_path: Path) -> None:
    actual = [100.0, 110.0, 120.0, 130.0, 140.0]
    with ForecastArchive(tmp_path / "a.sqlite") as archive:
        archive.write("p", "Z", forecasts=[(S0, S0 + H, 105.0), (S0, S0 + 2 * H, 100.0),
                                           (S0 + H, S0 + 2 * H, 120.0), (S0 + H, S0 + 3 * H, 126.0)],
                      actuals=[(S0 + i * H, v) for i, v in enumerate(actual)])
        archive.write("q", "Z", forecasts=[(S0, S0 + H, 110.0)])
        archive.write("p", "OTHER", forecasts=[(S0, S0 + H, 1.0)])
        report = zone_skill(archive, "Z", horizon_h=2, with_own=True)
    p = report.errors["p"]
    # At each hour, the latest issue: at 00:00 the 00:00 one, at 01:00 and 02:00 the 01:00 one (not too old).
    # Actuals 00:00-04:00: 100, 110, 120, 130, 140.
    # 1 h ahead: 01:00 105 - 110 = -5, 02:00 120 - 120 = 0, 03:00 126 - 130 = -4 (seen at 02:00);
    # 2 h ahead: 02:00 100 - 120 = -20, 03:00 126 - 130 = -4.
    assert p.count.tolist() == [3, 2]
    assert p.mae_g_per_kwh.tolist() == pytest.approx([3.0, 12.0])
    assert p.bias_g_per_kwh.tolist() == pytest.approx([-3.0, -12.0])
    assert p.rmse_g_per_kwh.tolist() == pytest.approx([np.sqrt(41 / 3), np.sqrt(416 / 2)])
    assert p.mape.tolist() == pytest.approx([(5 / 110 + 4 / 130) / 3, (20 / 120 + 4 / 130) / 2])
    assert report.errors["q"].mae_g_per_kwh[0] == pytest.approx(0.0)  # 110 for 01:00, which was 110
    assert COMPUTED_OWN in report.errors and report.skipped == {"p/OTHER (g_per_kwh)": 1}
    with pytest.raises(ConfigError, match="no forecasts in g_per_kwh for zone 'NOWHERE'"):
        with ForecastArchive(tmp_path / "a.sqlite", create=False) as archive:
            zone_skill(archive, "NOWHERE")


def test_actual_table_reads_only_the_hours_it_has() -> None:
    hourly = np.array([1.0, 2.0, 3.0])
    table = actual_table(hourly, S0, np.array([S0, S0 + H]), 3)
    assert table[0, :2].tolist() == [2.0, 3.0] and np.isnan(table[0, 2]) and np.isnan(table[1, 1:]).all()
