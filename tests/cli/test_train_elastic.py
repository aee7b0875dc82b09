"""``greentrain train`` elastic flags: one line and exit 2 before anything launches; the measured profile's rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.cli import main
from greentrain.policies.scaling_profile import ScalingProfile
from greentrain.runtime.scaling_measure import EnergyTrace, measure_scaling, profile_counts
from tests.runtime.harness import tiny_config

pytestmark = pytest.mark.timeout(60)

PROFILE = "replicas,throughput,power_w\n1,100,50\n2,190,100\n4,360,200\n"


def _run(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(["train", "--config", "tiny", "--device", "cpu", *args])
        raise SystemExit(0)
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "3", "--checkpoint-dir", "CKPT"], "--nproc: 3 processes are 3 replicas, not a count in"),
        (["--checkpoint-dir", "CKPT"], "give --nproc N"),
        (["--nproc", "2"], "needs --checkpoint-dir"),
        (["--nproc", "2", "--checkpoint-dir", "CKPT", "--cp", "2"], "needs parallel.cp = parallel.ep = 1"),
    ],
)
def test_bad_elastic_input_is_one_line_exit_2(tmp_path: Path, capsys, args, message) -> None:
    profile = tmp_path / "p.csv"
    profile.write_text(PROFILE, encoding="utf-8")
    base = ["--scaling-profile", str(profile), "--policy", "carbon-aware", "--zone", "GB"]
    code, err = _run(capsys, *base, *(str(tmp_path / "ckpt") if a == "CKPT" else a for a in args))
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_profile_row_names_file_and_row(tmp_path: Path, capsys) -> None:
    profile = tmp_path / "p.csv"
    profile.write_text("replicas,throughput,power_w\n1,100,50\n2,-1,100\n", encoding="utf-8")
    code, err = _run(capsys, "--scaling-profile", str(profile), "--policy", "carbon-aware", "--zone", "GB",
                     "--nproc", "2", "--checkpoint-dir", str(tmp_path / "ckpt"))
    assert code == 2 and f"{profile}: row 3: throughput must be a finite number > 0" in err
    code, err = _run(capsys, "--profile-scaling", "--nproc", "2")
    assert code == 2 and "--profile-scaling: give --scaling-profile FILE" in err


class _Meter:
    """A monitor whose cumulative energy grows at a known draw (W) per count being launched."""

    source_value = "measured"

    def __init__(self) -> None:
        self.draw_w = 0.0
        self.energy_j = 0.0
        self.last: float | None = None

    def total_energy_j(self) -> float:
        import time

        now = time.time()
        if self.last is not None:
            self.energy_j += self.draw_w * (now - self.last)
        self.last = now
        return self.energy_j

    def source(self):
        from greentrain.provenance import Source

        return Source.MEASURED


def test_measure_scaling_divides_tokens_and_energy_by_the_timed_window(tmp_path: Path) -> None:
    import json
    import time

    cfg = tiny_config(train={"global_batch": 8})
    counts, micro = profile_counts(cfg, 4)
    assert counts == [1, 2, 4] and micro == 2  # 3 replicas do not split 8 sequences into micro-batches of 2
    meter = _Meter()

    def launch(world: int, config_path: Path, result_path: Path) -> int:
        sized = json.loads(config_path.read_text())
        assert sized["train"]["grad_accum"] == 8 // (world * micro) and sized["checkpoint"]["dir"] is None
        if world == 4:
            return 1  # e.g. not enough devices: skipped with a note
        meter.draw_w = 100.0 * world
        time.sleep(0.15)
        t0 = time.time()
        time.sleep(0.4)
        t1 = time.time()
        time.sleep(0.15)
        result_path.write_text(json.dumps({"t0": t0, "t1": t1, "tokens": 1000 * world, "world": world}))
        return 0

    notes: list[str] = []
    profile = measure_scaling(cfg, counts, micro, launch, meter, note=notes.append)
    assert isinstance(profile, ScalingProfile) and profile.replica_counts == (1, 2)
    for point, world in zip(profile.points, (1, 2)):
        assert point.throughput == pytest.approx(1000 * world / 0.4, rel=0.05)
        assert point.power_w == pytest.approx(100.0 * world, rel=0.1)
        assert point.source.value == "measured"
    assert any("4 replicas (4 processes) failed" in n for n in notes)


def test_energy_trace_interpolates_between_samples() -> None:
    trace = EnergyTrace(monitor=None)
    trace.samples = [(0.0, 0.0), (1.0, 10.0), (2.0, 30.0)]
    assert trace.energy_j(0.5, 1.5) == pytest.approx(5.0 + 10.0)
    assert trace.energy_j(-1.0, 1.0) is None


def test_launch_elastic_relaunches_torchrun_with_the_sized_flags(tmp_path: Path) -> None:
    from greentrain.cli.train_elastic import launch_elastic
    from greentrain.runtime.elastic import ReplicaState

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    cfg = tiny_config(train={"global_batch": 8, "grad_accum": 2}, checkpoint={"dir": str(ckpt)})
    calls: list[tuple[int, list[str]]] = []

    def torchrun(nproc: int, max_restarts: int, argv: list[str]) -> int:
        calls.append((nproc, argv))
        if len(calls) == 1:  # the ranks at 2 ask for 4, as finish_rescale would write it
            ReplicaState(replicas=4, working=2, step=7, changes=1, micro_batch=2).save(ckpt)
            return 1
        return 0

    launch_elastic(cfg, 2, 0, ["--config", "tiny"], torchrun, lambda: None)
    assert [nproc for nproc, _ in calls] == [2, 4]
    for (nproc, argv), accum in zip(calls, (2, 1)):
        assert argv[:2] == ["--config", "tiny"]
        assert argv[argv.index("--grad-accum") + 1] == str(accum)  # 8 = replicas x accum x micro-batch 2
        assert argv[argv.index("--dp-shard") + 1] == "-1"
