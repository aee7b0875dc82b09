"""GPU acceptance benchmark: what greentrain measures on a real NVIDIA GPU, without ever writing to it.

    cp -r ../shared/tools/nvml-readonly /tmp/nvml-readonly
    GREENTRAIN_ADVISE_ONLY=1 PYTHONPATH=/tmp/nvml-readonly:$PWD \\
        python benchmarks/gpu_acceptance.py --out gpu-acceptance.json --markdown gpu-acceptance.md

Read-only by construction:

- it refuses to run unless advisory mode is on (``GREENTRAIN_ADVISE_ONLY=1`` or ``--advise-only``), so any
  greentrain ``Session`` it builds advises and applies nothing;
- before anything touches NVML it checks that the nvml-readonly shim (``sitecustomize``) is active; if not,
  it installs the same guard in-process. Either way every NVML setter/resetter is wrapped so that a call
  is refused (``NVML_ERROR_NO_PERMISSION``) and counted; the JSON reports the count and the exit status is
  3 if it is not 0.

Where CUDA exists it measures (sections in ``gpu_acceptance_sections.py``): monitor energy against the NVML
counter and against 2 ms-polled instant power over a mixed load; NVML call costs; Session overhead against a
bare bf16 loop in interleaved blocks; energy per step by precision; the runtime's tokens/s against a plain
compiled loop of the same model. It writes JSON (``--out``) and a markdown section for docs/benchmarks.md
(``--markdown``). Without CUDA it prints one line, writes "not measured" rows, and exits 0.

Exit status: 0 measured (or nothing to measure: no CUDA), 2 bad input or advisory mode off, 3 a setter was
attempted (and refused).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SHIM_MODULE = "sitecustomize"
"""Module name the nvml-readonly shim's refusing functions carry."""
_WRITE_WORDS = ("Set", "Reset", "Clear", "Modify")
SECTIONS = ("energy", "calls", "session", "precision", "runtime")


def setter_names(nvml: Any) -> list[str]:
    """Every NVML function that changes device state (the shim's own rule: Set/Reset/Clear/Modify, not getters)."""
    names = []
    for name in dir(nvml):
        if not name.startswith("nvml") or name.startswith(("nvmlEventSet", "nvmlDeviceGet", "nvmlSystemGet")):
            continue
        if any(word in name for word in _WRITE_WORDS) and callable(getattr(nvml, name)):
            names.append(name)
    return sorted(names)


class SetterGuard:
    """Wraps every NVML setter of ``nvml`` so a call is refused and counted; ``mode`` says what stood there."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.attempts: list[str] = []
        self._originals: dict[str, Any] = {}
        names = setter_names(nvml)
        shimmed = [n for n in names if getattr(getattr(nvml, n), "__module__", "") == SHIM_MODULE]
        self.mode = "nvml-readonly shim" if names and len(shimmed) == len(names) else "in-process guard"
        """'nvml-readonly shim' when the shim from ../shared/tools was first on PYTHONPATH, else our own."""
        for name in names:
            self._originals[name] = getattr(nvml, name)
            setattr(nvml, name, self._refuser(name))

    def _refuser(self, name: str) -> Callable[..., None]:
        def refuse(*args: Any, **kwargs: Any) -> None:
            self.attempts.append(name)
            raise self.nvml.NVMLError(self.nvml.NVML_ERROR_NO_PERMISSION)

        refuse.__name__ = name
        return refuse

    @property
    def guarded(self) -> list[str]:
        return sorted(self._originals)

    def uninstall(self) -> None:
        """Put the previous functions back (tests only; the benchmark keeps the guard to the end)."""
        for name, original in self._originals.items():
            setattr(self.nvml, name, original)
        self._originals.clear()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        _fail(f"error: {message}")  # one line, exit 2, no usage dump


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--advise-only", action="store_true", help="Advisory mode (as GREENTRAIN_ADVISE_ONLY=1).")
    parser.add_argument("--out", type=Path, help="Write the results as JSON here.")
    parser.add_argument("--markdown", type=Path, help="Write the docs/benchmarks.md section here.")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"Comma-separated subset of {SECTIONS}.")
    parser.add_argument("--load-s", type=float, default=30.0, help="Mixed-load window for the energy section.")
    parser.add_argument("--calls", type=int, default=300, help="Calls per NVML function timed.")
    parser.add_argument("--rounds", type=int, default=8, help="Interleaved rounds (session, runtime).")
    parser.add_argument("--steps", type=int, default=30, help="Steps per block / per precision.")
    parser.add_argument("--min-block-s", type=float, default=5.0,
                        help="Shortest energy block per precision, s: the counter refreshes every 100 ms.")
    parser.add_argument("--dim", type=int, default=768, help="Model width (the H100 reference: 768).")
    parser.add_argument("--layers", type=int, default=12, help="Model depth.")
    parser.add_argument("--heads", type=int, default=12, help="Attention heads.")
    parser.add_argument("--batch", type=int, default=16, help="Sequences per step.")
    parser.add_argument("--seq-len", type=int, default=1024, help="Tokens per sequence.")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # tests run the model sections on cpu
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {', '.join(unknown)}; valid: {', '.join(SECTIONS)}")
    args.sections = chosen
    for name in ("load_s", "calls", "rounds", "steps", "dim", "layers", "heads", "batch", "seq_len"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')}: must be > 0, got {getattr(args, name)}")
    if args.dim % args.heads:
        parser.error(f"--dim: {args.dim} must divide by --heads {args.heads}")
    return args


def _fail(message: str, code: int = 2) -> None:
    print(f"gpu_acceptance: {message}", file=sys.stderr)
    sys.exit(code)


def require_advisory(flag: bool) -> None:
    """Exit 2 with one line unless advisory mode is on; the flag turns it on for greentrain code run here."""
    from greentrain.actuators.advisory import ADVISE_ENV, advise_only_from_env
    from greentrain.errors import ConfigError

    try:
        on = flag or advise_only_from_env()
    except ConfigError as e:
        _fail(str(e))
    if not on:
        _fail(f"refusing to run: advisory mode is off; set {ADVISE_ENV}=1 or pass --advise-only "
              "(this benchmark never writes to the GPU)")
    os.environ[ADVISE_ENV] = "1"


def install_guard() -> SetterGuard | None:
    """Guard pynvml's setters before any NVML use; None when pynvml is not installed (nothing to write with)."""
    try:
        import pynvml
    except ImportError:
        return None
    return SetterGuard(pynvml)


def _header(args: argparse.Namespace, guard: SetterGuard | None) -> dict[str, Any]:
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "host": platform.node(),
            "python": platform.python_version(), "command": " ".join(["python", "benchmarks/gpu_acceptance.py",
                                                                      *sys.argv[1:]]),
            "nvml_guard": guard.mode if guard else "pynvml not installed",
            "setters_guarded": len(guard.guarded) if guard else 0}


def run(args: argparse.Namespace, guard: SetterGuard | None) -> dict[str, Any]:
    """The results dict: measured sections where CUDA exists, else the reason nothing was measured."""
    import torch

    results = _header(args, guard)
    if not torch.cuda.is_available():
        results.update(measured=False, reason="no CUDA device (torch.cuda.is_available() is False)",
                       torch=torch.__version__)
        return results
    import gpu_acceptance_sections as sections

    results.update(measured=True, torch=torch.__version__, device=torch.cuda.get_device_name())
    results.update(sections.run_sections(args))
    return results


def main(argv: list[str] | None = None) -> int:
    if str(Path(__file__).parent) not in sys.path:
        sys.path.insert(0, str(Path(__file__).parent))
    args = parse_args(argv)
    require_advisory(args.advise_only)
    guard = install_guard()
    results = run(args, guard)
    results["setter_attempts"] = list(guard.attempts) if guard else []
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    if args.markdown:
        from gpu_acceptance_markdown import render

        args.markdown.write_text(render(results))
    if not results["measured"]:
        print(f"gpu_acceptance: not measured: {results['reason']}")
    else:
        print(json.dumps(results, indent=1, default=str))
    if results["setter_attempts"]:
        print(f"gpu_acceptance: {len(results['setter_attempts'])} NVML setter call(s) attempted and refused: "
              f"{sorted(set(results['setter_attempts']))}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
