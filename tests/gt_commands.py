"""Commands that the tests of ``greentrain run`` and its supervisor run as real child processes."""

from __future__ import annotations

import textwrap

__all__ = ["CHECKPOINTING_WORKER"]

CHECKPOINTING_WORKER = textwrap.dedent(
    """
    import os, signal, sys, time
    out, state, n, tick = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    stop = False
    def on_usr1(signum, frame):
        global stop
        stop = True
    signal.signal(signal.SIGUSR1, on_usr1)
    start = int(open(state).read()) if os.path.exists(state) else 0
    for i in range(start, n):
        time.sleep(tick)
        with open(out, "a") as f:
            f.write(f"{i} {time.monotonic()!r} {os.environ.get('GREENTRAIN_RESTARTS')}\\n")
        if stop:
            with open(state + ".tmp", "w") as f:
                f.write(str(i + 1))
            os.replace(state + ".tmp", state)
            sys.exit(0)
    print("worker finished")
    sys.exit(7)
    """
)
"""``python worker.py OUT STATE N TICK_S``: N ticks of TICK_S, one line each in OUT (tick, time, relaunch
count); on SIGUSR1 it saves the next tick in STATE at the next tick and exits 0 (a checkpoint); a relaunch
resumes from STATE. Exits 7 after the last tick."""
