"""``greentrain fleet simulate --partition``: partitions on several grids, and their bad input all at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_fleet_cli import run_fleet
from test_simulate import write_trace

from greentrain.cli.fleet_partitions import PartitionSpec, parse_partition_spec

pytestmark = pytest.mark.timeout(120)

HEADER = "id,submit,gpus,work_hours,deadline_hours,partition,places\n"


def _trace(tmp_path: Path, name: str, values: list[float]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return write_trace(folder, values)


def test_a_partition_spec_parses_or_says_why() -> None:
    assert parse_partition_spec("north=NO:16:traces/NO.csv") == PartitionSpec("north", "NO", 16, Path("traces/NO.csv"))
    assert parse_partition_spec("b=NO:4") == PartitionSpec("b", "NO", 4, None)
    assert "expected NAME=ZONE:GPUS:TRACE" in str(parse_partition_spec("north"))
    assert "GPUS '0'" in str(parse_partition_spec("north=NO:0:x.csv"))


def test_jobs_go_where_the_grid_is_clean_and_pinned_jobs_stay_home(tmp_path: Path, capsys) -> None:
    dirty = _trace(tmp_path, "dirty", [400.0] * 48)
    clean = _trace(tmp_path, "clean", [50.0] * 48)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(HEADER + "a,2022-03-01T00:00Z,4,3,20,home,\nb,2022-03-01T00:00Z,4,3,20,home,home\n")
    code, out, err = run_fleet(capsys, "--jobs", str(jobs), "--partition", f"home=D:4:{dirty}",
                               "--partition", f"green=C:4:{clean}", "--power-kw-per-gpu", "0.5",
                               "--forecast", "perfect", "--json")
    assert code == 0, err
    report = json.loads(out)
    by_id = {j["id"]: j for j in report["jobs"]}
    assert {s["partition"] for s in by_id["a"]["schedule"]} == {"green"}
    assert {s["partition"] for s in by_id["b"]["schedule"]} == {"home"} and by_id["b"]["places"] == ["home"]
    summary = report["summary"]
    assert set(summary["baselines"]) == {"run-now", "greenest-now", "time-only", "offline-bound"}
    assert summary["baselines"]["run-now"]["emissions_g"] == pytest.approx(2 * 2 * 3 * 400.0)
    assert summary["emissions_g"] == pytest.approx(2 * 3 * (400.0 + 50.0))
    assert summary["fraction_of_bound_saving"] == pytest.approx(1.0, abs=1e-6)
    assert summary["partitions"]["green"]["gpu_hours"] == pytest.approx(12.0) and summary["migrations"] == 0
    assert [p["name"] for p in report["input"]["partitions"]] == ["home", "green"]
    code, out, err = run_fleet(capsys, "--jobs", str(jobs), "--partition", f"home=D:4:{dirty}",
                               "--partition", f"green=C:4:{clean}", "--forecast", "perfect")
    assert code == 0, err
    assert "migrations" in out and "home (D, 4), green (C, 4)" in " ".join(out.split())


def test_bad_partitions_and_places_are_listed_at_once_one_line_each_exit_2(tmp_path: Path, capsys) -> None:
    clean = _trace(tmp_path, "clean", [50.0] * 48)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(HEADER + "a,2022-03-01T00:00Z,4,3,20,home,mars;venus\n"
                    "b,2022-03-01T00:00Z,16,3,20,home,home;green\n"
                    "c,2022-03-01T00:00Z,2,3,20,broken,\n")
    code, out, err = run_fleet(capsys, "--jobs", str(jobs), "--partition", "home=D:8",
                               "--partition", f"green=C:4:{clean}", "--partition", "nonsense",
                               "--partition", f"broken=C:x:{clean}", "--migration-overhead-min", "-1")
    assert code == 2 and out == "" and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 6, err
    assert "'nonsense': expected NAME=ZONE:GPUS:TRACE" in err and "GPUS 'x'" in err
    assert "zone D has no trace" in err
    assert "--migration-overhead-min: must be a number >= 0" in err
    assert "places names no known partition: mars, venus" in err
    assert "gpus 16 is wider than every partition it may run on (home: 8, green: 4 GPUs)" in err
    assert "row 4" not in err  # the partition whose spec is wrong is not blamed on the jobs file again


def test_the_single_trace_form_and_partitions_do_not_mix(tmp_path: Path, capsys) -> None:
    clean = _trace(tmp_path, "clean", [50.0] * 48)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(HEADER + "a,2022-03-01T00:00Z,4,3,20,,\n")
    code, _, err = run_fleet(capsys, "--jobs", str(jobs), "--trace", str(clean), "--capacity-gpus", "4",
                             "--partition", f"green=C:4:{clean}")
    assert code == 2 and "not both" in err
    code, _, err = run_fleet(capsys, "--jobs", str(jobs))
    assert code == 2 and "--trace: needed" in err
