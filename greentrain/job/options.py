"""``JobOptions``: every setting of a greentrain job, spelled once.

``Session``'s keywords, the framework callbacks' keywords, the runtime's
``[greentrain]`` config section and the CLI's job flags are all these fields
(``tests/job/test_options_sources.py`` checks each front end against them).
Things that are objects rather than settings (model, optimizer, save/load
functions, clock, devices, process group, actuators, monitor, rate probe) are
``JobParts`` in ``greentrain.job.build``, not options.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from greentrain.errors import ConfigError

__all__ = ["JobOptions", "PauseMode", "Relaunch", "DeadlinePolicy", "Actuation", "PowerSwitch", "choices_of",
           "option_problems"]

PauseMode = Literal["checkpoint", "suspend", "auto"]
Relaunch = Literal["exec", "exit", "none"]
DeadlinePolicy = Literal["strict", "best-effort"]
Actuation = Literal["apply", "advise"]
PowerSwitch = bool | Literal["auto"]


@dataclass(kw_only=True)
class JobOptions:
    """The settings of one job (all optional; see each field)."""

    policy: Any = "carbon-aware"
    """Preset name, policy TOML path, or a ``Policy`` object."""
    zone: str | None = None
    """Grid zone (e.g. 'GB', 'US-CAL-CISO'); with no zone and no provider the job runs now and records energy."""
    provider: Any = None
    """Carbon source: a spec ('csv:PATH', 'electricitymaps', 'static', ...), a provider or a ``SignalChain``."""
    deadline: datetime | str | None = None
    """Aware datetime, ISO-8601 string with timezone, or '+H' hours from the job's first start."""
    deadline_policy: DeadlinePolicy | None = None
    """'strict' (refuse an impossible deadline; exit 3 after a late finish) or 'best-effort' (say it, run on);
    None: the policy's setting."""
    steps_total: int | None = None
    """Steps of the whole job (needed to plan pauses); a framework callback reads it from its trainer."""
    step_time_s: float | None = None
    """Expected step time before one is measured, seconds (plans a delayed start before step 0)."""
    decide_interval_s: float = 300.0
    """Longest time between two policy decisions, seconds of job clock."""
    pause_mode: PauseMode | None = None
    """'checkpoint' (save, stop, resume from the checkpoint), 'suspend' (wait in-process) or 'auto' (per pause:
    release when a relauncher exists and holding costs more); None: the policy's, else checkpoint if possible."""
    relaunch: Relaunch = "exec"
    """After a checkpoint pause: 'exec' (wait, re-exec the script), 'exit' (exit 75 for a scheduler to requeue)
    or 'none' (return; the next run resumes)."""
    checkpoint_dir: str | Path | None = None
    """Folder of the default model+optimizer checkpoint and of ``greentrain-state.json``."""
    state_path: str | Path | None = None
    """The job's deadline and totals across relaunches (default ``checkpoint_dir/greentrain-state.json``)."""
    stop_signals: tuple[int, ...] = ()
    """Signals that make the job checkpoint and stop at the next step boundary (framework callbacks)."""
    waiting_power_w: float | None = None
    """Draw while paused, watts, instead of the held devices' measured idle draw (0 when released)."""
    max_emissions_g: float | None = None
    """Carbon budget, grams CO2eq: warned once when projected over; when spent, checkpoint and stop."""
    max_energy_j: float | None = None
    """Energy budget, joules (as ``max_emissions_g``)."""
    power: PowerSwitch = "auto"
    """Profile power limits in the first steps: True, False, or 'auto' (when the policy uses power and a GPU
    has power-limit control). Limits are journaled and restored on every exit."""
    precision: Sequence[str] | None = None
    """Precisions to trial by measured energy per step, reference first (e.g. ['fp32', 'bf16'])."""
    profile_cache_dir: str | Path | None | Literal[False] = None
    """Cache of measured operating points per GPU model and workload (None: default folder; False: none)."""
    state_dir: str | Path | None = None
    """The actuators' journal folder (default: the user's state folder)."""
    actuation: Actuation | None = None
    """'apply' or 'advise' (report every power, clock and precision decision, apply none); None: 'apply'
    unless ``GREENTRAIN_ADVISE_ONLY=1``."""
    job: str = "greentrain"
    """Job label in metrics, logs and the state file."""
    jsonl: str | Path | None = None
    """Write the JSONL run log here."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on this port (0: any free one)."""
    metrics_addr: str = "127.0.0.1"
    """Metrics bind address."""
    metrics_allow_public: bool = False
    """Allow a non-loopback ``metrics_addr`` (the endpoint is unauthenticated; logged as a warning)."""
    progress: bool = True
    """One progress line on stderr now and then."""

    def __post_init__(self) -> None:
        problems = list(_problems(self))
        if problems:
            raise ConfigError("\n".join(f"{name}: {why}" for name, why in problems))

    def replace(self, **changes: Any) -> JobOptions:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)


def choices_of(name: str) -> tuple[Any, ...] | None:
    """The ``Literal`` choices of field ``name`` (None when it has none), e.g. for a CLI flag."""
    hint = typing.get_type_hints(JobOptions)[name]
    parts = [hint] if typing.get_origin(hint) is Literal else list(typing.get_args(hint))
    found = [c for part in parts if typing.get_origin(part) is Literal for c in typing.get_args(part)]
    return tuple(found) or None


def option_problems(**values: Any) -> list[tuple[str, str]]:
    """``(field, why)`` for each bad value among ``values`` (the other fields at their defaults): the checks
    of ``JobOptions`` for a front end that collects problems its own way (the runtime's ``[greentrain]``)."""
    unknown = sorted(set(values) - set(JobOptions.__dataclass_fields__))
    if unknown:
        raise TypeError(f"not JobOptions fields: {unknown}")
    settings = {f.name: f.default for f in dataclasses.fields(JobOptions)} | values
    return list(_problems(SimpleNamespace(**settings)))  # type: ignore[arg-type]


def _one_of(value: Any, name: str, none_ok: bool = True) -> str | None:
    allowed = [repr(c) for c in choices_of(name) or ()]
    if (value is None and none_ok) or repr(value) in allowed and isinstance(value, str):
        return None
    return f"{value!r} is not {', '.join(allowed[:-1])} or {allowed[-1]}"


def _number(value: Any, *, low_ok: bool) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and (
        value >= 0 if low_ok else value > 0)


def _problems(o: JobOptions) -> typing.Iterator[tuple[str, str]]:
    """(field, why) for each bad value; messages match what each front end said before."""
    for name in ("pause_mode", "relaunch", "deadline_policy", "actuation"):
        why = _one_of(getattr(o, name), name, none_ok=name != "relaunch")
        if why:
            yield name, why
    if o.power not in (True, False, "auto"):
        yield "power", f"{o.power!r} is not True, False or 'auto'"
    if o.precision is not None and (isinstance(o.precision, str) or not all(isinstance(p, str) for p in o.precision)):
        yield "precision", f"give a list of names such as ['fp32', 'bf16'], got {o.precision!r}"
    if o.waiting_power_w is not None and not _number(o.waiting_power_w, low_ok=True):
        yield "waiting_power_w", f"must be a number of watts >= 0, got {o.waiting_power_w!r}"
    for name in ("max_emissions_g", "max_energy_j"):
        value = getattr(o, name)
        if value is not None and not _number(value, low_ok=False):
            yield name, f"must be a number > 0, got {value!r}"
    if not _number(o.decide_interval_s, low_ok=False):
        yield "decide_interval_s", f"must be > 0, got {o.decide_interval_s}"
    if o.step_time_s is not None and not _number(o.step_time_s, low_ok=False):
        yield "step_time_s", f"must be a number of seconds > 0, got {o.step_time_s!r}"
    if o.steps_total is not None and (isinstance(o.steps_total, bool) or not isinstance(o.steps_total, int)
                                      or o.steps_total < 0):
        yield "steps_total", f"must be >= 0, got {o.steps_total}"
    if o.metrics_port is not None and not (isinstance(o.metrics_port, int) and 0 <= o.metrics_port <= 65535):
        yield "metrics_port", f"must be a port number 0..65535, got {o.metrics_port!r}"
    if not isinstance(o.job, str) or not o.job.strip():
        yield "job", "must not be empty"
    if not all(isinstance(s, int) for s in o.stop_signals):
        yield "stop_signals", f"give signal numbers, e.g. (signal.SIGTERM,), got {o.stop_signals!r}"
