"""Checkpoint mode end to end in a real process: save, wait, re-exec the script, resume, finish."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gt_session_loop import reference_losses  # noqa: E402

HERE = Path(__file__).parent
STEPS = 12

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from datetime import UTC, datetime, timedelta
    sys.path[:0] = [{session_dir!r}, {engine_dir!r}]
    from gt_engine_doubles import TraceSignals, hourly, varying
    from gt_session_loop import PauseAtSteps, make_model, train_step
    from greentrain.clock import SystemClock
    from greentrain.session import Session

    clock = SystemClock()
    now = clock.now()
    signals = TraceSignals(hourly(now - timedelta(hours=1), varying(200, 4)), clock)
    model, opt = make_model()
    with Session(PauseAtSteps({{5}}, pause_s=0.3), provider=signals, steps_total={steps}, model=model,
                 optimizer=opt, checkpoint_dir={ckpt!r}, clock=clock, devices=False, progress=False,
                 decide_interval_s=1e-9, jsonl={jsonl!r}) as session:
        for step in range(session.start_step, {steps}):
            loss = train_step(model, opt, step)
            with open({out!r}, "a") as f:
                f.write(f"{{os.getpid()}} {{step}} {{loss.item()!r}}\\n")
            session.step(loss=loss)
            if session.should_stop:
                break
    print("finished" if session.finished else "stopped")
    """
)


@pytest.mark.timeout(90)
def test_checkpoint_pause_reexecs_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "steps.txt"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(session_dir=str(HERE), engine_dir=str(HERE.parent / "engine"), steps=STEPS,
                                    ckpt=str(tmp_path / "ckpt"), jsonl=str(tmp_path / "run.jsonl"), out=str(out)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("GREENTRAIN_STATE_FILE", None)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=80, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "finished"
    rows = [line.split() for line in out.read_text().splitlines()]
    assert [int(r[1]) for r in rows] == list(range(STEPS)), "each step exactly once, in order"
    assert len({r[0] for r in rows}) == 1, "exec keeps the pid: a relaunch, not a new job"
    assert [float(r[2]) for r in rows] == reference_losses(STEPS)
    assert "paused until" in proc.stderr
