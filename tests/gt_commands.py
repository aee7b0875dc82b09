"""Commands that the tests of ``greentrain run`` and its supervisor run as real child processes.

Each is ``python worker.py OUT STATE N TICK_S``: N ticks of TICK_S, one line each in OUT (tick, time,
relaunch count), resuming from the tick saved in STATE. They differ in how they take a pause:

* ``CHECKPOINTING_WORKER`` speaks the handshake by hand: it creates ``$GREENTRAIN_CHECKPOINT_READY`` once its
  SIGUSR1 handler is installed, and on the signal saves at the next tick and exits 75;
* ``HANDSHAKE_WORKER`` does the same through ``greentrain.job.handshake.on_pause`` (saving at a step
  boundary);
* ``SNAPSHOT_WORKER`` saves STATE after every tick on its own and declares nothing: SIGUSR1 would kill it.

All exit 7 after the last tick.
"""

from __future__ import annotations

import textwrap

__all__ = ["CHECKPOINTING_WORKER", "HANDSHAKE_WORKER", "SNAPSHOT_WORKER"]

CHECKPOINTING_WORKER = textwrap.dedent(
    """
    import os, signal, sys, time
    out, state, n, tick = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    stop = False
    def on_usr1(signum, frame):
        global stop
        stop = True
    signal.signal(signal.SIGUSR1, on_usr1)
    if os.environ.get("GREENTRAIN_CHECKPOINT_READY"):
        open(os.environ["GREENTRAIN_CHECKPOINT_READY"], "w").close()
    start = int(open(state).read()) if os.path.exists(state) else 0
    for i in range(start, n):
        time.sleep(tick)
        with open(out, "a") as f:
            f.write(f"{i} {time.monotonic()!r} {os.environ.get('GREENTRAIN_RESTARTS')}\\n")
        if stop:
            with open(state + ".tmp", "w") as f:
                f.write(str(i + 1))
            os.replace(state + ".tmp", state)
            sys.exit(75)
    print("worker finished")
    sys.exit(7)
    """
)

HANDSHAKE_WORKER = textwrap.dedent(
    """
    import os, sys, time
    from greentrain.job.handshake import on_pause, restarts
    out, state, n, tick = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    done = int(open(state).read()) if os.path.exists(state) else 0
    def save():
        with open(state + ".tmp", "w") as f:
            f.write(str(done))
        os.replace(state + ".tmp", state)
    pause = on_pause(save, at_step_boundary=True)
    while done < n:
        time.sleep(tick)
        with open(out, "a") as f:
            f.write(f"{done} {time.monotonic()!r} {restarts()}\\n")
        done += 1
        pause.check()
    print("worker finished")
    sys.exit(7)
    """
)

SNAPSHOT_WORKER = textwrap.dedent(
    """
    import os, sys, time
    out, state, n, tick = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    start = int(open(state).read()) if os.path.exists(state) else 0
    for i in range(start, n):
        time.sleep(tick)
        with open(out, "a") as f:
            f.write(f"{i} {time.monotonic()!r} {os.environ.get('GREENTRAIN_RESTARTS')}\\n")
        with open(state + ".tmp", "w") as f:
            f.write(str(i + 1))
        os.replace(state + ".tmp", state)
    print("worker finished")
    sys.exit(7)
    """
)
