"""Per-node aggregation of local ranks: merge rules and rank files."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from greentrain.exporters import MetricsServer
from greentrain.exporters.multiproc import NodeCollector, RankFiles, merge
from greentrain.jobstats import JobStats

pytestmark = pytest.mark.timeout(30)

J = (("job", "j"),)


def test_merge_applies_each_metrics_rule() -> None:
    rank0 = [("greentrain_training_tokens_total", J, 100.0), ("greentrain_training_steps_total", J, 10.0),
             ("greentrain_cpu_energy_joules_total", (("package", "package-0"), ("source", "measured")), 50.0),
             ("greentrain_job_state", (("job", "j"), ("state", "running")), 1.0)]
    rank1 = [("greentrain_training_tokens_total", J, 120.0), ("greentrain_training_steps_total", J, 9.0),
             ("greentrain_cpu_energy_joules_total", (("package", "package-0"), ("source", "measured")), 51.0),
             ("greentrain_job_state", (("job", "j"), ("state", "running")), 0.0)]
    merged = {(name, labels): value for name, labels, value in merge([rank0, rank1])}
    assert merged[("greentrain_training_tokens_total", J)] == 220.0  # sum: per-rank batches
    assert merged[("greentrain_training_steps_total", J)] == 10.0  # max: lock-step
    assert merged[("greentrain_cpu_energy_joules_total", (("package", "package-0"), ("source", "measured")))] == 51.0
    assert merged[("greentrain_job_state", (("job", "j"), ("state", "running")))] == 1.0  # first: the leader


def test_rank_files_ignore_other_jobs_runs_and_torn_files(tmp_path: Path) -> None:
    mine = RankFiles(tmp_path, job="j", run_id="r1")
    mine.write(1, [("greentrain_training_steps_total", J, 4.0)])
    RankFiles(tmp_path, job="j", run_id="old-run").write(2, [("greentrain_training_steps_total", J, 99.0)])
    RankFiles(tmp_path, job="other", run_id="r1").write(3, [("greentrain_training_steps_total", J, 99.0)])
    (tmp_path / "greentrain-j-rank4.json").write_text('{"job": "j", "ra')  # mid-write by a crashed rank
    assert mine.read_others(0) == [(1, [("greentrain_training_steps_total", J, 4.0)])]


def test_leader_serves_the_node_total_and_followers_do_not_bind(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    s0, s1 = JobStats(job="j"), JobStats(job="j")
    s0.add(steps=5, tokens=50, emissions_g=1.0)
    s1.add(steps=5, tokens=70, emissions_g=2.0)
    monkeypatch.setenv("LOCAL_RANK", "1")
    follower = MetricsServer(job="j", job_stats=s1, multiprocess_dir=tmp_path).start()
    assert not follower.serving
    follower.stop()  # writes its final state
    registry = CollectorRegistry()
    monkeypatch.setenv("LOCAL_RANK", "0")
    leader = MetricsServer(job="j", job_stats=s0, registry=registry, multiprocess_dir=tmp_path)
    get = registry.get_sample_value
    assert get("greentrain_training_tokens_total", {"job": "j"}) == 120
    assert get("greentrain_training_steps_total", {"job": "j"}) == 5
    assert get("greentrain_emissions_grams_total", {"job": "j"}) == 3.0
    assert get("greentrain_exporter_ranks", {"job": "j"}) == 2
    assert leader.serving


def test_local_rank_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "3")
    server = MetricsServer(job="j", multiprocess_dir=tmp_path)
    assert server.local_rank == 3 and not server.serving
    NodeCollector  # noqa: B018 - public for users composing their own registry


def test_leftover_files_of_an_earlier_run_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import time

    old = RankFiles(tmp_path, job="j")
    old.write(1, [("greentrain_training_tokens_total", J, 1000.0)])
    body = json.loads(old.path(1).read_text())
    body["written_at"] = time.time() - 3600  # the previous run, an hour ago, same job name and directory
    old.path(1).write_text(json.dumps(body))
    registry = CollectorRegistry()
    stats = JobStats(job="j")
    stats.add(tokens=10)
    monkeypatch.setenv("LOCAL_RANK", "0")
    MetricsServer(job="j", job_stats=stats, registry=registry, multiprocess_dir=tmp_path)
    assert registry.get_sample_value("greentrain_training_tokens_total", {"job": "j"}) == 10
    assert registry.get_sample_value("greentrain_exporter_ranks", {"job": "j"}) == 1
