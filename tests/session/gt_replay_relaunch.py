"""A script that replays a carbon trace on a ``ReplayClock`` made at the top, as a demo script does, and
pauses by checkpoint with ``relaunch="exec"``: ``gt_replay_relaunch.py WORKDIR STEPS``.

Hour 0 of the trace is clean, hour 1 dirty, the rest clean; the policy pauses through the dirty hour. Every
(re)start appends ``start`` to WORKDIR/steps.txt, every step ``step N <simulated time>``.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORIGIN = datetime(2022, 10, 10, 0, tzinfo=UTC)
SPEEDUP = 3600.0  # one trace hour per real second
PAD_S = 0.05  # each step at least 50 ms real = 3 simulated minutes


def main(workdir: Path, steps: int) -> None:
    sys.path[:0] = [str(HERE), str(HERE.parent / "engine")]
    from gt_engine_doubles import ThresholdPolicy, TraceSignals, hourly
    from gt_session_loop import make_model, train_step

    from greentrain.clock import ReplayClock
    from greentrain.session import Session

    model, opt = make_model()
    clock = ReplayClock(ORIGIN, speedup=SPEEDUP)  # every start makes it at the same origin
    signals = TraceSignals(hourly(ORIGIN, [100, 500] + [100] * 40), clock)
    with open(workdir / "steps.txt", "a") as out:
        out.write("start\n")
    with Session(ThresholdPolicy(200), provider=signals, steps_total=steps, model=model, optimizer=opt,
                 checkpoint_dir=workdir / "ckpt", clock=clock, devices=False, progress=False, decide_interval_s=60,
                 step_time_s=PAD_S * SPEEDUP, min_wait_saving=0.0, jsonl=workdir / "run.jsonl") as session:
        for step in range(session.start_step, steps):
            train_step(model, opt, step)
            time.sleep(PAD_S)
            with open(workdir / "steps.txt", "a") as out:
                out.write(f"step {step} {clock.now().isoformat()}\n")
            session.step(tokens=32)
            if session.should_stop:
                break
    print("finished" if session.finished else "stopped")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
