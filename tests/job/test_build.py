"""build_job is the one place a job is assembled: the only ``Engine(`` in the house, closes what it
opened when a part fails half-way, and closes the engine first, the hardware last."""

from __future__ import annotations

import ast
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from greentrain.clock import FrozenClock
from greentrain.device import DeviceSet
from greentrain.events import read_events
from greentrain.job.build import JobParts, build_job
from greentrain.job.options import JobOptions
from greentrain.job.state import EngineState
from greentrain.jobstats import JobStats
from greentrain.policies import load_policy
from greentrain.testing import FakeGPU

PACKAGE = Path(__file__).resolve().parents[2] / "greentrain"
NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
# torch's own internals, reached on purpose (FSDP mixed-precision state, DeviceMesh flattening, op names)
TORCH_PRIVATE = {"runtime/ac.py", "runtime/fsdp.py", "runtime/parallel_dims.py"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [(str(p.relative_to(PACKAGE)), ast.parse(p.read_text(encoding="utf-8"))) for p in PACKAGE.rglob("*.py")]


def test_engine_is_constructed_in_one_module_only() -> None:
    building = {name for name, tree in _modules() for node in ast.walk(tree)
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Engine"}
    assert building == {"job/build.py"}


def test_no_module_reads_another_objects_private_members() -> None:
    reads = [f"{name}:{node.lineno}: {ast.unparse(node)}" for name, tree in _modules() if name not in TORCH_PRIVATE
             for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
             and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]
    assert reads == []


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive()}


def test_a_part_failing_half_way_closes_what_was_already_opened(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        before = _threads()
        options = JobOptions(policy="run-now", metrics_port=busy.getsockname()[1], jsonl=tmp_path / "run.jsonl",
                             progress=False)
        parts = JobParts(clock=FrozenClock(NOW), devices=DeviceSet([FakeGPU("a40")], [], []))
        with pytest.raises(Exception, match="127.0.0.1"):  # the metrics port is taken: after the monitor started
            build_job(options, parts, policy=load_policy("run-now"), job_stats=JobStats())
        deadline = time.monotonic() + 10
        while _threads() - before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _threads() - before, "the monitor's sampler was stopped"


def test_a_relaunched_job_keeps_its_first_deadline_and_closes_in_order(tmp_path: Path) -> None:
    first = NOW - timedelta(hours=5)
    prior = EngineState(job="greentrain", deadline=(first + timedelta(hours=12)).isoformat(), steps_done=40)
    gpu = FakeGPU("a40")
    job = build_job(JobOptions(policy="run-now", deadline="+12", steps_total=100, progress=False,
                               jsonl=tmp_path / "run.jsonl"),
                    JobParts(clock=FrozenClock(NOW), devices=DeviceSet([gpu], [], [])),
                    policy=load_policy("run-now"), job_stats=JobStats(), prior=prior, steps_done=40)
    assert job.engine.deadline.at == first + timedelta(hours=12) and job.engine.progress.steps_done == 40
    assert job.monitor is not None and job.devices.gpus == [gpu]
    job.close()
    job.close()  # safe twice
    kinds = [e["event"] for e in read_events(tmp_path / "run.jsonl")]
    assert kinds.count("summary") == 1 and kinds[-1] == "sample"  # the engine closed first, the monitor after


def test_a_job_that_measures_nothing_serves_metrics_and_reports_energy_unknown(tmp_path: Path) -> None:
    """devices=False: the null monitor stands in; the metrics endpoint serves, the summary says unknown, not 0."""
    import urllib.request

    from greentrain.engine.jobsummary import job_figures

    options = JobOptions(policy="run-now", steps_total=2, metrics_port=0, progress=False,
                         jsonl=tmp_path / "run.jsonl")
    job = build_job(options, JobParts(clock=FrozenClock(NOW), devices=False), policy=load_policy("run-now"),
                    job_stats=JobStats())
    try:
        assert not job.engine.measures_energy
        job.engine.begin()
        for _ in range(2):
            job.engine.step_begin()
            job.engine.step_end(tokens=1)
        with urllib.request.urlopen(job.metrics.url, timeout=10) as reply:
            assert b"greentrain_training_steps_total" in reply.read()
    finally:
        job.close()
    figures = job_figures(job.engine)
    assert figures.energy_j is None and figures.emissions_g is None
