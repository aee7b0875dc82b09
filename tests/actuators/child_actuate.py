"""Child process for the exit-path tests: changes a file-backed GPU's knobs, then exits as told.

usage: child_actuate.py STATE_DIR GPU_FILE MODE SEED
MODE: normal | exception | sigint | sigterm | atexit | sigkill-loop | chained-sigterm | user-handler-loop
      | default-loop
Prints 'ready' once a setting is applied, waits for a line on stdin, then behaves per MODE
(user-handler-loop: 'ready' at once, then changes settings in a loop until its own handler sees a signal;
default-loop: the same loop with Python's default handlers, until a signal ends the process).
"""

from __future__ import annotations

import faulthandler
import random
import signal
import sys
import time

from greentrain.actuators import ActuatorSet, Journal
from greentrain.testing import FileBackedGPU
from greentrain.policies.base import Decision


def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # a harness that finds us hung asks for our stack
    state_dir, gpu_file, mode, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = random.Random(seed)
    gpu = FileBackedGPU(gpu_file, "a40")
    if mode == "chained-sigterm":
        signal.signal(signal.SIGTERM, lambda s, f: (print("host-handler", flush=True), sys.exit(7)))
    if mode in ("user-handler-loop", "default-loop"):
        change_loop(state_dir, gpu, rng, own_handler=mode == "user-handler-loop")
        return
    acts = ActuatorSet([gpu], state_dir=state_dir, job=f"child-{mode}")
    acts.recover()
    if mode == "atexit":  # no context manager: only the atexit hook can restore
        acts.apply(Decision(power_limit_w=150.0, sm_clocks_mhz=(900, 1200)))
        print("ready", flush=True)
        sys.stdin.readline()
        sys.exit(0)
    if mode == "sigkill-loop":
        print("ready", flush=True)
        while True:  # the parent kills us at a random instant
            limit = rng.choice([100.0, 125.0, 150.0, 175.0, 200.0, 250.0, 300.0])
            clocks = rng.choice([None, (600, 900), (1200, 1500)])
            acts.apply(Decision(power_limit_w=limit, sm_clocks_mhz=clocks))
            if rng.random() < 0.2:
                acts.restore_all()
    with acts:
        acts.apply(Decision(power_limit_w=175.0, sm_clocks_mhz=(1200, 1500)))
        print("ready", flush=True)
        sys.stdin.readline()  # the parent checks the GPU changed, then says go
        if mode == "exception":
            raise RuntimeError("planted failure in the training step")
        if mode in ("sigint", "sigterm", "chained-sigterm"):
            time.sleep(60)  # the parent signals us
    print("clean-exit", flush=True)


def change_loop(state_dir: str, gpu: FileBackedGPU, rng: random.Random, *, own_handler: bool) -> None:
    """A script changing settings every "step"; with ``own_handler`` it installs (first) a SIGINT/SIGTERM
    handler that only sets a stop flag, else Python's defaults end it (KeyboardInterrupt / termination)."""
    seen: list[tuple[int, bool]] = []  # (signal, whether it landed inside acts.apply)
    in_apply = [False]

    def on_stop(signum: int, frame: object) -> None:
        seen.append((signum, in_apply[0]))

    if own_handler:
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGTERM, on_stop)
    else:  # Python's defaults, even when started from a background job (which inherits SIGINT ignored)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with ActuatorSet([gpu], state_dir=state_dir, job="child-user-handler") as acts:
        boundary = getattr(acts, "at_step_boundary", lambda: None)  # absent before issue 17: measures the old code
        acts.recover()
        print("ready", flush=True)
        while not seen:  # one "step" per iteration: a decision, then the step boundary
            limit = rng.choice([100.0, 125.0, 150.0, 175.0, 200.0, 250.0, 300.0])
            clocks = rng.choice([None, (600, 900), (1200, 1500)])
            in_apply[0] = True
            acts.apply(Decision(power_limit_w=limit, sm_clocks_mhz=clocks))
            in_apply[0] = False
            boundary()
        boundary()  # the boundary at which the script acts on its flag
        at_boundary = gpu.is_default() and not Journal(state_dir, gpu.uuid).entries()
        for _ in range(3):  # the script finishes its step / checkpoint: decisions keep coming, changes are held
            acts.apply(Decision(power_limit_w=150.0, sm_clocks_mhz=(600, 900)))
            boundary()
        held = gpu.is_default()
        print(f"stopped signal={seen[0][0]} in_apply={int(seen[0][1])} signals={len(seen)} "
              f"restored_at_boundary={int(at_boundary)} held={int(held)}", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):  # a late second signal must not kill the interpreter's shutdown
        signal.signal(sig, signal.SIG_IGN)
    print("clean-exit", flush=True)


if __name__ == "__main__":
    main()
