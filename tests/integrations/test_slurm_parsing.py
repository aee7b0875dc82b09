"""Parsing what Slurm prints and what users pass to sbatch."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from greentrain.errors import ConfigError
from greentrain.integrations.slurm import (
    PAUSED_EXIT_CODE,
    JobTag,
    find_option,
    format_slurm_time,
    parse_job_record,
    parse_slurm_time,
    parse_time_limit_s,
    split_sbatch_args,
    write_resume_time,
)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 5400), ("10:30", 630), ("4:00:00", 14400), ("1-12", 129600), ("2-0:30", 174600), ("1-0:0:5", 86405),
])
def test_time_limits(text: str, seconds: float) -> None:
    assert parse_time_limit_s(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "0", "x-1", "-5"])
def test_bad_time_limits(text: str) -> None:
    with pytest.raises(ConfigError, match="--time"):
        parse_time_limit_s(text)


def test_split_and_find_options_know_which_flags_take_values() -> None:
    args = ["-p", "gpu", "--requeue", "--gres", "gpu:2", "-t30", "--exclusive", "-N", "2", "run.sh", "-t", "99"]
    options, script = split_sbatch_args(args)
    assert script == ["run.sh", "-t", "99"]
    assert find_option(args, "--time", "-t") == "30"  # not the script's own -t
    assert find_option(args, "--gres") == "gpu:2"
    assert find_option(["--time=1:00:00", "x.sh"], "--time", "-t") == "1:00:00"


def test_job_tag_round_trips_through_a_comment_and_a_record() -> None:
    tag = JobTag(zone="DE-LU", deadline=datetime(2026, 11, 22, 6, tzinfo=UTC), estimate_h=2.5, power_limit_w=210)
    line = (f"JobId=7 JobName=x JobState=PENDING Reason=BeginTime Comment=nightly run {tag.render()} "
            "StartTime=2026-11-22T01:00:00 Partition=gpu")
    record = parse_job_record(line)
    assert record["Comment"] == f"nightly run {tag.render()}"
    assert JobTag.find(record["Comment"], "7") == tag
    assert parse_slurm_time(record["StartTime"]) == datetime(2026, 11, 22, 1, tzinfo=UTC)
    assert parse_slurm_time("Unknown") is None
    with pytest.raises(ConfigError, match="job 7: no greentrain plan"):
        JobTag.find("nightly run", "7")


def test_resume_time_file_for_the_batch_template(tmp_path, monkeypatch) -> None:
    target = tmp_path / "resume"
    when = datetime(2026, 11, 22, 3, 0, 0, 500_000, tzinfo=UTC)
    assert write_resume_time(when, env={"GREENTRAIN_RESUME_FILE": str(target)}) == target
    assert target.read_text().strip() == format_slurm_time(datetime(2026, 11, 22, 3, 0, 1, tzinfo=UTC))
    assert write_resume_time(when, env={}) is None  # outside the template: nothing written


def test_exit_code_matches_the_session_and_the_template() -> None:
    from pathlib import Path

    from greentrain.session import RESUME_EXIT_CODE

    template = (Path(__file__).resolve().parents[2] / "integrations" / "slurm" / "greentrain-job.sbatch").read_text()
    assert PAUSED_EXIT_CODE == RESUME_EXIT_CODE == 75
    assert f"readonly PAUSED_EXIT={PAUSED_EXIT_CODE}" in template
