"""The jobs file: values, scaling profiles, and every bad row reported at once, one line each."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.fleet.jobs import load_jobs, parse_jobs

HEADER = "id,submit,gpus,work_hours,deadline_hours\n"


def test_reads_jobs_with_deadlines_and_nominal_power() -> None:
    jobs = parse_jobs(HEADER + "a,2022-03-01T09:30:00Z,4,2.5,24\nb,2022-03-01T10:00:00+01:00,1,1,1\n", "j.csv",
                      capacity_gpus=8, power_kw_per_gpu=0.7)
    assert [j.id for j in jobs] == ["a", "b"]
    assert jobs[0].submit == datetime(2022, 3, 1, 9, 30, tzinfo=UTC)
    assert jobs[0].deadline - jobs[0].submit == timedelta(hours=24)
    assert jobs[1].submit == datetime(2022, 3, 1, 9, 0, tzinfo=UTC)  # an offset is converted to UTC
    assert jobs[0].gpus == 4 and jobs[0].options[0].power_kw == pytest.approx(2.8)


def test_every_problem_is_one_line_all_at_once() -> None:
    text = HEADER + "\n".join([
        "a,2022-03-01T00:00Z,2,1,10",
        "a,2022-03-01T00:00Z,2,1,10",       # duplicate id
        "b,2022-03-01T00:00Z,0,1,10",       # no GPUs
        "c,2022-03-01T00:00Z,2,-1,10",      # no work
        "d,2022-03-01T00:00Z,99,1,10",      # wider than the cluster
        "e,2022-03-01T00:00Z,2,5,4",        # deadline shorter than its work
        "f,yesterday,2,1,10",               # not a time
        "g,2022-03-01T00:00Z,1.5,1,10",     # half a GPU
    ]) + "\n"
    with pytest.raises(ConfigError) as caught:
        parse_jobs(text, "jobs.csv", capacity_gpus=64, power_kw_per_gpu=0.7)
    lines = str(caught.value).splitlines()
    assert len(lines) == 7, lines
    assert all(line.startswith("jobs.csv: row ") for line in lines)
    assert "duplicate id 'a' (first on row 2)" in lines[0]
    assert "gpus must be > 0" in lines[1] and "work_hours must be > 0" in lines[2]
    assert "wider than the cluster (64 GPUs)" in lines[3]
    assert "deadline_hours 4 is shorter than work_hours 5" in lines[4]
    assert "is not ISO-8601" in lines[5] and "not a whole number" in lines[6]


def test_missing_columns_and_empty_files_are_named() -> None:
    with pytest.raises(ConfigError, match="missing column.*deadline_hours"):
        parse_jobs("id,submit,gpus,work_hours\n", "j.csv", capacity_gpus=8, power_kw_per_gpu=1)
    with pytest.raises(ConfigError, match="no jobs"):
        parse_jobs(HEADER, "j.csv", capacity_gpus=8, power_kw_per_gpu=1)


def test_a_scaling_profile_gives_the_job_other_widths(tmp_path: Path) -> None:
    # Measured ratios (throughput and draw) scale the job; the nominal width keeps the per-GPU power.
    (tmp_path / "p.csv").write_text("replicas,throughput,power_w\n1,100,50\n2,180,95\n4,300,190\n8,400,380\n")
    (tmp_path / "jobs.csv").write_text(HEADER.strip() + ",scaling_profile,replicas\n"
                                       "a,2022-03-01T00:00Z,4,10,30,p.csv,2\n")
    job = load_jobs(tmp_path / "jobs.csv", capacity_gpus=10, power_kw_per_gpu=0.5)[0]
    widths = {o.gpus: o for o in job.options}
    assert job.options[0].gpus == 4 and sorted(widths) == [2, 4, 8]  # 16 GPUs would not fit the cluster
    assert widths[8].speed == pytest.approx(300 / 180) and widths[8].power_kw == pytest.approx(2.0 * 190 / 95)
    assert widths[2].speed == pytest.approx(100 / 180)


def test_profile_problems_are_reported_per_row(tmp_path: Path) -> None:
    (tmp_path / "p.csv").write_text("replicas,throughput,power_w\n1,100,50\n2,180,95\n")
    (tmp_path / "jobs.csv").write_text(HEADER.strip() + ",scaling_profile,replicas\n"
                                       "a,2022-03-01T00:00Z,4,10,30,p.csv,3\n"
                                       "b,2022-03-01T00:00Z,4,10,30,missing.csv,\n"
                                       "c,2022-03-01T00:00Z,3,10,30,p.csv,2\n")
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "jobs.csv", capacity_gpus=10, power_kw_per_gpu=0.5)
    lines = str(caught.value).splitlines()
    assert len(lines) == 3
    assert "replicas '3' is not a replica count" in lines[0]
    assert "scaling_profile" in lines[1] and "missing.csv" in lines[1]
    assert "not a multiple of replicas 2" in lines[2]
