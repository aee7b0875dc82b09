"""The scaling-profile CSV: values, labels and one line per bad row."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.policies.scaling_profile import (ScalingPoint, format_scaling_profile, load_scaling_profile,
                                                 parse_scaling_profile)
from greentrain.provenance import Source

GOOD = "replicas,throughput,power_w\n1,100,50\n2,180,95\n4,300,190\n"


def test_reads_points_and_speed() -> None:
    profile = parse_scaling_profile(GOOD, "p.csv")
    assert profile.replica_counts == (1, 2, 4)
    assert profile.speed(4, reference=2) == pytest.approx(300 / 180)
    assert profile.speed(0, reference=2) == 0.0
    assert profile.power_w(0) == 0.0 and profile.power_w(2) == 95
    assert profile.within(2, 8).replica_counts == (2, 4)


def test_round_trip_keeps_labels(tmp_path) -> None:
    points = [ScalingPoint(1, 10.0, 5.0, Source.MEASURED), ScalingPoint(2, 19.0, 9.5, Source.ESTIMATED)]
    path = tmp_path / "s.csv"
    path.write_text(format_scaling_profile(points))
    assert load_scaling_profile(path).points == tuple(points)


def test_every_bad_row_named_at_once() -> None:
    text = "replicas,throughput,power_w\n1,100,50\n1,120,60\n3,,70\n4,0,80\n5,nan,90\n0,10,10\n"
    with pytest.raises(ConfigError) as e:
        parse_scaling_profile(text, "bad.csv")
    lines = str(e.value).splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["row 3", "row 4", "row 5", "row 6", "row 7"]
    assert all(line.startswith("bad.csv: row") for line in lines)


def test_missing_column_and_unknown_count() -> None:
    with pytest.raises(ConfigError, match="lacks column"):
        parse_scaling_profile("replicas,throughput\n1,2\n", "x.csv")
    with pytest.raises(ConfigError, match="3 replicas is not in the scaling profile; valid: 1, 2, 4"):
        parse_scaling_profile(GOOD, "p.csv").point(3)
