"""``greentrain train``: one real torchrun launch, in-process runs, and one-line errors (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from greentrain.cli import main
from greentrain.cli.train import build_config

TINY_TOML = """
[model]
dim = 32
n_layers = 4
n_heads = 4
max_seq_len = 64
[train]
steps = 3
global_batch = 8
seq_len = 16
lr = 1e-2
warmup_steps = 1
device = "cpu"
[data]
max_bytes = 100000
"""


@pytest.fixture()
def job_toml(tmp_path: Path) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(TINY_TOML, encoding="utf-8")
    return path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.timeout(60)
def test_single_process_run_writes_metrics(job_toml: Path, tmp_path: Path, capsys) -> None:
    jsonl = tmp_path / "m.jsonl"
    main(["train", "--config", str(job_toml), "--metrics-jsonl", str(jsonl), "--metrics-port", "0"])
    out = capsys.readouterr().out
    assert "step      3" in out and "done: 3/3 steps" in out
    records = _records(jsonl)
    assert [r["step"] for r in records] == [1, 2, 3]
    for r in records:
        assert {"step", "loss", "grad_norm", "tokens_per_s"} <= set(r) and r["tokens_per_s"] > 0
    assert records[-1]["loss"] < records[0]["loss"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_torchrun_launch_matches_single_process(job_toml: Path, tmp_path: Path, capsys) -> None:
    single = tmp_path / "single.jsonl"
    main(["train", "--config", str(job_toml), "--metrics-jsonl", str(single)])
    multi = tmp_path / "multi.jsonl"
    cmd = [sys.executable, "-m", "greentrain", "train", "--config", str(job_toml), "--nproc", "4",
           "--pp", "2", "--tp", "2", "--pp-schedule", "gpipe", "--microbatches", "2",
           "--metrics-jsonl", str(multi)]
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=170)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "on pp=2 dp_replicate=1 dp_shard=1 tp=2" in done.stdout
    for a, b in zip(_records(single), _records(multi), strict=True):
        assert a["step"] == b["step"]
        assert abs(a["loss"] - b["loss"]) <= 2e-6
        assert abs(a["grad_norm"] - b["grad_norm"]) <= 1e-5 * a["grad_norm"]


@pytest.mark.parametrize(("args", "message"), [
    (["--tp", "2"], "--tp: pp=1 * dp_replicate=1 * cp=1 * ep=1 * tp=2 = 2 processes (from --tp), but this job has 1"),
    (["--nproc", "2", "--tp", "3"], "--tp: pp=1 * dp_replicate=1 * cp=1 * ep=1 * tp=3 = 3 processes (from --tp), "
                                    "but this job has 2"),
    # context and expert parallelism: the mesh names every flag that set it; one line, exit 2
    (["--nproc", "4", "--cp", "2", "--tp", "2", "--dp-shard", "2"],
     "--tp: pp=1 * dp_replicate=1 * dp_shard=2 * cp=2 * ep=1 * tp=2 = 8 processes (from --dp-shard, --cp, --tp), "
     "but this job has 4"),
    (["--config", "tiny-moe", "--nproc", "2", "--ep", "2", "--dp-shard", "2"],
     "--ep: pp=1 * dp_replicate=1 * dp_shard=2 * cp=1 * ep=2 * tp=1 = 4 processes (from --dp-shard, --ep), "
     "but this job has 2"),
    (["--nproc", "2", "--cp", "2", "--seq-len", "62"], "--cp: train.seq_len=62 must divide by 2 x cp = 4"),
    (["--config", "tiny-moe", "--nproc", "3", "--ep", "3"], "--ep: model.n_experts=8 must divide by ep=3"),
    (["--nproc", "2", "--ep", "2"], "--ep: 2: expert parallelism needs a mixture-of-experts model"),
    (["--set", "train.lr"], "is not section.key=value"),
    (["--set", "train.dtype=\"fp8\""], "train.dtype: 'fp8' is not 'fp32', 'bf16', 'fp16' or 'tf32'"),
    (["--config", "nope"], "no such file or preset"),
    (["--deadline", "tomorrow"], "is not ISO-8601"),
    (["--steps", "0"], "greentrain: error: --steps: must be >= 1, got 0"),
    (["--config", "1b", "--device", "cuda"], "no CUDA device is visible"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], message: str, capsys) -> None:
    if "cuda" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present: the cuda preset would really train")
    with pytest.raises(SystemExit) as info:
        main(["train", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("flag", [["--steps", "1"], ["--set", "train.steps=1"], []])
def test_a_section_that_is_not_a_table_is_one_line_whatever_else_is_given(flag: list[str], tmp_path, capsys) -> None:
    """A runtime config with ``train = 5``: one line naming the file and key, exit 2, also when a command-line
    value belongs in that section (it once ended in a TypeError)."""
    config = tmp_path / "run.toml"
    config.write_text("train = 5\n")
    with pytest.raises(SystemExit) as info:
        main(["train", "--config", str(config), *flag])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"greentrain: error: {config}: train: must be a table [train]"


def test_help_lists_the_documented_flags(capsys) -> None:
    try:
        main(["train", "--help"])
    except SystemExit as e:  # depending on the click version, --help exits 0 or returns
        assert e.code == 0
    out = capsys.readouterr().out
    for flag in ("--config", "--steps", "--seed", "--dp-replicate", "--dp-shard", "--tp", "--pp", "--pp-schedule",
                 "--microbatches", "--cp", "--ep", "--dtype", "--metrics-jsonl", "--metrics-port", "--metrics-addr",
                 "--checkpoint-dir", "--policy", "--zone", "--provider", "--deadline", "--nproc", "--mesh"):
        assert flag in out


@pytest.mark.parametrize(("deadline_policy", "status"), [("strict", 3), ("best-effort", 0)])
def test_a_late_finish_is_said_and_gives_status_3_unless_best_effort(deadline_policy: str, status: int,
                                                                    capsys) -> None:
    """The trainer under a policy on a replayed calendar: 20 tiny steps of >= 5 ms real at x36000 take over an
    hour of job time against a 30-minute deadline. The clock is held until the first step (so the Session's
    start-up is not job time) and `greentrain train` exits with the status the run leaves."""
    from datetime import UTC, datetime

    from greentrain.demo.clock import HoldableReplayClock
    from greentrain.runtime.greentrain_hooks import run_training

    clock = HoldableReplayClock(datetime(2022, 3, 1, tzinfo=UTC), speedup=36000.0)
    flags = {"steps": 20, "device": "cpu", "policy": "run-now", "deadline_policy": deadline_policy}
    cfg = build_config("tiny", flags, ())
    cfg = cfg.replace("greentrain", deadline="2022-03-01T00:30:00Z")
    trainer, history = run_training(cfg, on_step=lambda m: clock.release(), session_kwargs={"clock": clock})
    err = capsys.readouterr().err
    assert len(history) == 20
    assert trainer.deadline_exit_code == status, err
    assert "greentrain: DEADLINE MISSED: finished" in err and "(simulated)" in err
