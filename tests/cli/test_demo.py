"""``greentrain demo`` end to end, as a user runs it: a subprocess on the shipped GB trace at a high speed-up.

One job, two processes: the first is interrupted with SIGINT while it trains,
the second (same ``--out``) resumes it, pauses through a dirty window,
resumes from its checkpoint and finishes before the deadline. Between them
the test checks the clean exit; during both it scrapes the metrics endpoint.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Self

import httpx
import pytest

from tests.ranks import free_port

SPEEDUP = "2500"  # a day of trace in ~35 s (a lower speed-up amplifies step-time noise less)
# More slack before the deadline than the default 2 h: on a shared 2-core CI machine the step time can
# double mid-run, and at ×2500 every real 0.1 s is 4 simulated minutes of work.
RESERVE_HOURS = "6"


def _events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip().endswith("}")]


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


class _Scraper:
    """Polls the metrics endpoint in the background; remembers the step counters it read."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.answers: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                response = httpx.get(self.url, timeout=2.0)
                if response.status_code == 200:
                    self.answers.append(response.text)
            except httpx.HTTPError:
                pass  # not up yet, or between segments
            self._stop.wait(0.2)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def _demo(out: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "greentrain", "demo", "--out", str(out), "--speedup", SPEEDUP,
           "--metrics-port", str(port), "--no-progress", "--reserve-hours", RESERVE_HOURS]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _interrupt_after_steps(proc: subprocess.Popen, log: Path, steps: int, timeout_s: float,
                           scraper: "_Scraper") -> None:
    """SIGINT once ``steps`` steps are logged and the metrics endpoint has answered while training."""
    deadline = time.monotonic() + timeout_s
    while (sum(e.get("event") == "step" for e in _events(log)) < steps
           or not any("greentrain_training_steps_total" in a for a in scraper.answers)):
        assert proc.poll() is None, f"the demo exited before training:\n{proc.communicate()[0]}"
        assert time.monotonic() < deadline, "the demo did not train and serve metrics in time"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)


def _reference_losses(steps_total: int) -> list[float]:
    """The same job trained straight through, without greentrain."""
    import torch

    from greentrain.demo import demo_config
    from greentrain.runtime.trainer import Trainer

    torch.set_num_threads(1)
    trainer = Trainer(demo_config(None, steps_total))
    return [trainer.train_step().loss for _ in range(steps_total)]


@pytest.mark.timeout(150)
def test_demo_waits_pauses_resumes_survives_ctrl_c_and_reports(tmp_path: Path) -> None:
    out, port = tmp_path / "demo", free_port()
    log = out / "run.jsonl"

    # Run 1: interrupted while training.
    with _Scraper(port) as scraper_1:
        first = _demo(out, port)
        _interrupt_after_steps(first, log, steps=3, timeout_s=60, scraper=scraper_1)
        text_1, _ = first.communicate(timeout=30)  # returns once no process holds its stdout: no stray child
    assert first.returncode == 130, text_1
    assert f"resume with: greentrain demo --out {out}" in text_1
    assert "Contains data from Electricity Maps" in text_1 and "licensed under ODbL" in text_1
    assert f"metrics: http://127.0.0.1:{port}/metrics" in text_1
    state_1 = json.loads((out / "demo.json").read_text())
    assert not state_1["finished"]
    steps_1 = [e["step"] for e in _events(log) if e["event"] == "step"]
    assert len(steps_1) >= 3
    assert any((out / "checkpoint").iterdir()), "Ctrl-C must leave a checkpoint"
    summaries_1 = [e for e in _events(log) if e["event"] == "summary"]
    assert summaries_1 and not summaries_1[-1].get("lost_steps"), "the demo's saved work was counted as lost"
    assert any("greentrain_training_steps_total" in a for a in scraper_1.answers), "metrics never answered"
    stopped_at = _time(state_1["sim_now"])
    events_1 = len(_events(log))

    # Run 2: resumes the same job (and the simulated time) and finishes it.
    with _Scraper(port) as scraper_2:
        second = _demo(out, port)
        text_2, _ = second.communicate(timeout=100)
    assert second.returncode == 0, text_2
    assert f"resumed from the checkpoint at step {steps_1[-1]}" in text_2, text_2
    assert scraper_2.answers, "the metrics endpoint did not answer during the second run"

    events = _events(log)
    state = json.loads((out / "demo.json").read_text())
    steps_total = state["steps_total"]
    step_events = [e for e in events if e["event"] == "step"]
    assert [e["step"] for e in step_events] == list(range(1, steps_total + 1)), "a step was lost or repeated"
    resumed_at = _time(events[events_1]["t"])
    assert 0 <= (resumed_at - stopped_at).total_seconds() < 3 * 3600, \
        f"the second run's clock must continue from {stopped_at}, not restart ({resumed_at})"

    # It paused through a dirty window and resumed.
    states = [e["state"] for e in events if e["event"] == "state"]
    assert "paused" in states and "running" in states[states.index("paused"):], states

    # Met its deadline (simulated calendar).
    assert state["finished"]
    assert _time(step_events[-1]["t"]) <= _time(state["deadline"])
    assert "deadline met" in text_2

    # Summary table and report.
    for label in ("Energy", "estimated", "Emissions", "Avoided vs run-now", "Finished vs deadline"):
        assert label in text_2
    index = out / "report" / "index.html"
    html = index.read_text(encoding="utf-8")
    images = sorted(p.name for p in index.parent.glob("*.png"))
    assert images and all(f'src="{name}"' in html for name in images), (images, html[:500])

    # No lost step in substance either: losses match the job trained straight through.
    logged = [e["loss"] for e in step_events]
    assert logged == pytest.approx(_reference_losses(steps_total), rel=1e-4, abs=1e-5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("args", "message"), [
    (["--zone", "FR"], "--zone: no shipped trace for 'FR'"),
    (["--trace", "x.csv"], "--start: required with --trace"),
    (["--start", "2021-06-01T00:00Z"], "--start: 2021-06-01T00:00:00Z is outside"),
    (["--start", "2022-03-14T00:30Z"], "not the start of a trace interval"),
    (["--start", "2022-12-31T12:00Z"], "too short for the deadline"),
    (["--deadline", "tomorrow"], "is not ISO-8601"),
    (["--work-hours", "30"], "deadline: 24 h is shorter than the work (30 h)"),
    (["--policy", "no-such-policy"], "no-such-policy"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str],
                                         message: str) -> None:
    from greentrain.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--out", str(tmp_path / "out"), "--no-progress", *args])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out" / "demo.json").exists(), "nothing is started on bad input"


@pytest.mark.timeout(30)
def test_damaged_state_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from greentrain.cli import main

    (tmp_path / "demo.json").write_text("{oops")
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"{tmp_path / 'demo.json'}: not a greentrain demo state" in err
