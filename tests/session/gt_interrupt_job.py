"""One process lifetime of a small job that may be interrupted: ``gt_interrupt_job.py WORKDIR STEPS PAUSES
SIGINT_AT DEADLINE``.

It trains the shared tiny model with the default checkpoint in WORKDIR/ckpt (its state file beside it),
energy from a constant-power monitor on the wall clock, pauses (checkpoint, ``relaunch="none"``) after
each step in PAUSES (comma-separated, possibly empty), and sends itself SIGINT after step SIGINT_AT (-1:
never), as Ctrl-C would. Each step appends ``pid step`` to WORKDIR/steps.txt; the last line on stdout is
``finished`` or ``stopped``.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(workdir: Path, steps: int, pauses: set[int], sigint_at: int, deadline: str) -> None:
    sys.path[:0] = [str(HERE), str(HERE.parent / "engine")]
    from datetime import timedelta

    from gt_engine_doubles import ClockMonitor, TraceSignals, hourly, varying
    from gt_session_loop import PauseAtSteps, make_model, train_step

    from greentrain.clock import SystemClock
    from greentrain.session import Session

    clock = SystemClock()
    signals = TraceSignals(hourly(clock.now() - timedelta(hours=1), varying(200, 48)), clock)
    model, opt = make_model()
    with Session(PauseAtSteps(pauses, pause_s=0.0), provider=signals, steps_total=steps, model=model,
                 optimizer=opt, checkpoint_dir=workdir / "ckpt", clock=clock, relaunch="none",
                 monitor=ClockMonitor(clock, power_w=100.0), progress=False, decide_interval_s=1e-9,
                 step_time_s=0.01, deadline=deadline, jsonl=workdir / "run.jsonl") as session:
        for step in range(session.start_step, steps):
            train_step(model, opt, step)
            with open(workdir / "steps.txt", "a") as out:
                out.write(f"{os.getpid()} {step}\n")
            session.step(tokens=32)
            if step == sigint_at:
                os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: KeyboardInterrupt at the next bytecode
            if session.should_stop:
                break
    print("finished" if session.finished else "stopped")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), {int(p) for p in sys.argv[3].split(",") if p}, int(sys.argv[4]),
         sys.argv[5])
