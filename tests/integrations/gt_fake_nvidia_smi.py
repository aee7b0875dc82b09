"""A stand-in for ``nvidia-smi`` with the power-limit behaviour of real GPUs.

State (per GPU index: limit, min, max in W) lives in the JSON file named by
``FAKE_NVSMI_STATE``; tests seed it from a measured GPU profile. Out-of-range
limits and unknown indices fail the way nvidia-smi does; ``FAKE_NVSMI_FAIL_SET=1``
makes every set fail (a GPU that stopped answering). Each set is logged.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    state_path = Path(os.environ["FAKE_NVSMI_STATE"])
    state = json.loads(state_path.read_text())
    index = argv[argv.index("-i") + 1] if "-i" in argv else "0"
    gpu = state.get(index)
    if gpu is None:
        print("No devices were found", file=sys.stderr)
        return 6
    query = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")), None)
    if query is not None:
        names = {"power.limit": "limit", "power.min_limit": "min", "power.max_limit": "max"}
        print(", ".join(f"{gpu[names[q]]:.2f}" for q in query.split(",")))
        return 0
    if "-pl" in argv:
        watts = float(argv[argv.index("-pl") + 1])
        if os.environ.get("FAKE_NVSMI_FAIL_SET") == "1":
            print(f"Failed to set power limit for GPU {index}: Unknown Error", file=sys.stderr)
            return 255
        if not gpu["min"] <= watts <= gpu["max"]:
            print(f"Provided power limit {watts:.2f} W is not a valid power limit which should be between "
                  f"{gpu['min']:.2f} W and {gpu['max']:.2f} W for GPU {index}", file=sys.stderr)
            return 2
        print(f"Power limit for GPU {index} was set to {watts:.2f} W from {gpu['limit']:.2f} W.")
        gpu["limit"] = watts
        gpu.setdefault("sets", []).append(watts)
        state_path.write_text(json.dumps(state))
        return 0
    print("unsupported arguments", argv, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
