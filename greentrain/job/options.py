"""``JobOptions``: every setting of a greentrain job, declared once.

A setting is one field below: its name, type (``Literal`` choices included),
default, docstring and check. Every front end is generated from the fields,
as torchtitan generates its command line from its config dataclasses:

- ``Session``'s keywords (``SessionSettings``) and the framework callbacks'
  (``JobSettings``), typed ``**settings`` (written out for the type checker,
  held to the fields by a test);
- the flags of ``greentrain run``, ``greentrain train`` and ``greentrain demo``
  (``greentrain.cli.jobflags``: the flag's name, type, choices, default and
  help come from the field);
- the runtime's ``[greentrain]`` section (``greentrain.runtime.sections``),
  read by the same rules.

A field's ``offered`` metadata names the front ends that take it; the
framework callbacks take every field. Adding a setting is one field here and
its test. Things that are objects rather than settings (model, optimizer,
save/load functions, clock, devices, process group, actuators, monitor, rate
probe) are ``JobParts`` in ``greentrain.job.build``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TypedDict, TypeGuard

from greentrain.clock import parse_deadline
from greentrain.engine.collaborators import CarbonSignal
from greentrain.errors import ConfigError
from greentrain.fields import choices_in, did_you_mean, field_docs, hints, type_problem
from greentrain.policies.base import Policy
from greentrain.policies.settings import DeadlinePolicy, PauseMode, budget_problems
from greentrain.policies.worth import DEFAULT_MIN_SAVING_FRAC
from greentrain.signals.base import CarbonIntensityProvider

__all__ = ["JobOptions", "FrontEnd", "Setting", "PauseMode", "Relaunch", "DeadlinePolicy", "Actuation",
           "PowerSwitch", "PolicySpec", "ProviderSpec", "JobSettings", "SessionSettings", "offered", "settings_for",
           "choices_of", "option_problems", "unknown_settings"]

Relaunch = Literal["exec", "exit", "none", "auto"]
Actuation = Literal["apply", "advise"]
PowerSwitch = bool | Literal["auto"]
PolicySpec = str | Path | Policy
"""A preset name, a policy TOML file, or a ``Policy``."""
ProviderSpec = str | CarbonIntensityProvider | CarbonSignal
"""A provider spec ('csv:PATH', 'electricitymaps', 'static', ...), a provider, or a ``SignalChain``."""

FrontEnd = Literal["session", "run", "train", "demo", "simulate", "submit", "monitor", "exporter"]
"""Where a setting can be given besides the framework callbacks (which take every one): ``Session``'s
keywords, the flags of ``greentrain run``, ``greentrain train`` (its flags and the runtime's ``[greentrain]``
section), ``greentrain demo``, ``greentrain simulate`` (the settings the simulator replays as the engine
does), ``greentrain submit`` (where and by when a Slurm job is planned), ``greentrain monitor`` and
``greentrain exporter`` (their metrics endpoint)."""

_OFFERED = "offered"
_FLAG = "flag"
_DEFAULT_FRONT_ENDS: tuple[FrontEnd, ...] = ("session", "run", "train")


def offered(*front_ends: FrontEnd, flag: tuple[str, object] | None = None) -> dict[str, object]:
    """A field's metadata: the front ends that take it (without this: Session, ``greentrain run`` and
    ``greentrain train``), and ``flag=(spelling, value)`` for a switch that sets the field to ``value``."""
    return {_OFFERED: front_ends, **({_FLAG: flag} if flag else {})}


@dataclass(kw_only=True)
class JobOptions:
    """The settings of one job (all optional; see each field)."""

    policy: PolicySpec = field(default="carbon-aware", metadata=offered("session", "run", "train", "demo"))
    """Policy: a preset name or a policy TOML file (a ``Policy`` object from Python)."""
    zone: str | None = field(default=None, metadata=offered("session", "run", "train", "demo", "submit"))
    """Grid zone (e.g. GB, US-CAL-CISO); with no zone and no provider the job runs now and records energy."""
    provider: ProviderSpec | None = field(default=None, metadata=offered("session", "run", "train", "submit"))
    """Carbon source: electricitymaps, watttime, ukgrid, static, csv:PATH (or a provider or ``SignalChain``
    from Python)."""
    deadline: datetime | str | None = field(default=None, metadata=offered(
        "session", "run", "train", "demo", "submit"))
    """ISO-8601 with timezone (2026-11-22T06:00Z) or '+H' hours from the job's first start (+12); an aware
    datetime from Python."""
    deadline_policy: DeadlinePolicy | None = field(default=None, metadata=offered(
        "session", "run", "train", "demo", "simulate"))
    """'strict' (refuse a deadline shorter than the work; exit status 3 after a late finish) or 'best-effort'
    (say so, run on, no status 3); unset: the policy's setting. A likely miss is said on stderr either way."""
    steps_total: int | None = field(default=None, metadata=offered("session"))
    """Steps of the whole job (needed to plan pauses); a framework callback reads it from its trainer."""
    step_time_s: float | None = field(default=None, metadata=offered("session"))
    """Expected step time before one is measured, seconds (plans a delayed start before step 0)."""
    decide_interval_s: float = 300.0
    """Longest time between two policy decisions, seconds of job clock."""
    min_wait_saving: float = field(default=DEFAULT_MIN_SAVING_FRAC, metadata=offered("session", "run", "train", "simulate"))
    """A delay or pause is taken only if its expected net saving (on the forecast with its measured bias
    taken out) exceeds this fraction of the job's expected emissions; ties run now."""
    estimate_error: float = field(default=0.0, metadata=offered("session", "run", "train", "demo", "simulate"))
    """How much longer than estimated the work may take (fraction; 0.5: up to 1.5 x): plans and the deadline
    guard keep that room for all the work left, over the slower of the estimate and the measured rate."""
    pause_mode: PauseMode | None = None
    """'checkpoint' (save, stop, resume from the checkpoint), 'suspend' (wait in-process, holding the devices)
    or 'auto' (per pause: release when a relauncher exists and holding costs more); unset: the policy's,
    else checkpoint if possible."""
    relaunch: Relaunch = field(default="exec", metadata=offered("session", "train"))
    """After a checkpoint pause: 'exec' (wait, re-exec the script), 'exit' (exit 75 for a scheduler to requeue),
    'none' (return; the next run resumes) or 'auto' (exec for one process, exit for several)."""
    checkpoint_dir: str | Path | None = field(default=None, metadata=offered("session"))
    """Folder of the job's checkpoint (``Session``'s default model+optimizer one; the framework's pause
    checkpoint under the Lightning and Accelerate callbacks) and of the job's state file."""
    state_path: str | Path | None = field(default=None, metadata=offered("session"))
    """The job's deadline and totals across relaunches (default: the state file in ``checkpoint_dir``)."""
    stop_signals: tuple[int, ...] = field(default=(), metadata=offered())
    """Signals that make the job checkpoint and stop at the next step boundary (framework callbacks)."""
    waiting_power_w: float | None = None
    """Draw while paused, watts, instead of the held devices' measured idle draw (0 when released): e.g. a
    node that stays powered for you."""
    max_emissions_g: float | None = None
    """Carbon budget, grams CO2eq: warned once when projected over; when spent, checkpoint and stop (exit
    status 4)."""
    max_energy_j: float | None = None
    """Energy budget, joules (as the carbon budget)."""
    scaling_profile: str | Path | None = field(default=None, metadata=offered("run", "train", "simulate"))
    """Carbon scaling: CSV ``replicas,throughput,power_w`` of this job; the policy picks its replica count per
    interval (``greentrain run``: the command's --nproc/--nproc-per-node, relaunched after the checkpoint signal,
    --estimate-hours being the running time at its own count; ``greentrain train``: the world size under
    --nproc, or where --profile-scaling writes it). Unset: the job keeps its size."""
    scaling_profile_steps: int = field(default=4, metadata=offered("train"))
    """With ``--profile-scaling`` (``greentrain train``): optimizer steps timed at each world size (after one warm-up)."""
    max_replicas: int | None = field(default=None, metadata=offered("session", "run", "train", "simulate"))
    """The most data-parallel replicas carbon scaling may use (None: the scaling profile's largest count)."""
    min_replicas: int = field(default=1, metadata=offered("session", "run", "train", "simulate"))
    """The fewest data-parallel replicas carbon scaling may use (a pause, 0 replicas, is always allowed)."""
    power: PowerSwitch = field(default="auto", metadata=offered("session"))
    """Profile power limits in the first steps: True, False, or 'auto' (when the policy uses power and a GPU
    has power-limit control). Limits are journaled and restored on every exit."""
    precision: Sequence[str] | None = field(default=None, metadata=offered("session"))
    """Precisions to trial by measured energy per step, reference first (e.g. ['fp32', 'bf16'])."""
    profile_cache_dir: str | Path | Literal[False] | None = field(default=None, metadata=offered("session"))
    """Cache of measured operating points per GPU model and workload (None: default folder; False: none)."""
    state_dir: str | Path | None = field(default=None, metadata=offered("session"))
    """The actuators' journal folder (default: the user's state folder)."""
    actuation: Actuation | None = field(default=None, metadata=offered(
        "session", "train", "demo", flag=("--advise-only", "advise")))
    """'advise' (advisory mode) reports every power-limit, clock and precision decision and applies none;
    'apply' applies them. Unset: 'apply' unless GREENTRAIN_ADVISE_ONLY=1."""
    job: str = "greentrain"
    """Job label in metrics, logs and the state file."""
    jsonl: str | Path | None = field(default=None, metadata=offered("session", "run"))
    """Write the JSONL run log here."""
    codecarbon_csv: str | Path | None = field(default=None, metadata=offered("session", "run", "train", "demo"))
    """Also append a CodeCarbon-compatible row (the installed CodeCarbon's columns) to this emissions.csv when
    the run ends, one row per process of the job, so dashboards built on CodeCarbon keep working."""
    metrics_port: int | None = field(default=None, metadata=offered("session", "run", "demo", "monitor", "exporter"))
    """Serve Prometheus metrics on this port (0: any free one)."""
    metrics_addr: str = field(default="127.0.0.1", metadata=offered("session", "run", "monitor", "exporter"))
    """Metrics bind address."""
    metrics_allow_public: bool = field(default=False, metadata=offered("session", "run", "monitor", "exporter"))
    """Allow a non-loopback metrics address (the endpoint is unauthenticated; logged as a warning)."""
    progress: bool = field(default=True, metadata=offered("session", "demo"))
    """Progress on the terminal now and then (a countdown while waiting)."""
    quiet: bool = field(default=False, metadata=offered("session", "run", "train", "demo"))
    """Say no plan line at the start and no summary line at the end (library: the 'greentrain.report' logger;
    command line: stderr). Warnings are still said."""

    def __post_init__(self) -> None:
        problems = option_problems(self.values())
        if problems:
            raise ConfigError("\n".join(f"{name}: {why}" for name, why in problems))

    def values(self) -> dict[str, object]:
        """Every field's value by name (the settings as keywords, e.g. for a ``Session``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def callback_problems(self) -> list[tuple[str, str]]:
        """``(field, why)`` for what a framework callback cannot do: it pauses by checkpoint or suspend only (no
        relauncher of its own to release to), cannot relaunch at another world size (carbon scaling), and cannot
        put fp16's grad scaler inside the framework's step."""
        problems = []
        if self.pause_mode not in (None, "checkpoint", "suspend"):
            problems.append(("pause_mode", f"{self.pause_mode!r} is not 'checkpoint' or 'suspend'"))
        if self.scaling_profile is not None:
            problems.append(("scaling_profile", "carbon scaling relaunches the job at another world size, which a "
                                                "callback cannot do; use `greentrain train` or `greentrain run`"))
        if self.precision is not None and "fp16" in self.precision:
            problems.append(("precision", "'fp16' needs a grad scaler inside the training step, which a callback "
                                          "cannot add; trial 'fp32', 'tf32' or 'bf16' (or use Session)"))
        return problems

    def replace(self, **changes: object) -> JobOptions:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of ``JobOptions`` as a front end shows it."""

    name: str
    hint: object
    """The field's annotation, resolved."""
    default: object
    doc: str
    """The field's docstring, whitespace collapsed."""
    choices: tuple[object, ...]
    """The ``Literal`` values it allows (empty: any value of its type)."""
    flag: tuple[str, object] | None
    """A switch that sets the field to a value (``--advise-only`` sets 'advise'), or None: ``--name``."""


def settings_for(front_end: FrontEnd | None = None) -> list[Setting]:
    """The fields ``front_end`` takes, in declaration order (None: every field, the callbacks' keywords)."""
    docs, types = field_docs(JobOptions), hints(JobOptions)
    out = []
    for f in dataclasses.fields(JobOptions):
        if front_end is not None and front_end not in f.metadata.get(_OFFERED, _DEFAULT_FRONT_ENDS):
            continue
        flag = f.metadata.get(_FLAG)
        out.append(Setting(name=f.name, hint=types[f.name], default=f.default, doc=docs.get(f.name, ""),
                           choices=choices_in(types[f.name]), flag=flag if isinstance(flag, tuple) else None))
    return out


def choices_of(name: str) -> tuple[object, ...] | None:
    """The ``Literal`` choices of field ``name`` (None when it has none)."""
    return choices_in(hints(JobOptions)[name]) or None


def unknown_settings(names: Mapping[str, object], front_end: FrontEnd | None = None) -> list[tuple[str, str]]:
    """``(name, why)`` for each of ``names`` that ``front_end`` does not take, with the closest that it does."""
    known = [s.name for s in settings_for(front_end)]
    return [(name, f"unknown setting{did_you_mean(name, known)}; valid: {', '.join(known)}")
            for name in names if name not in known]


def option_problems(values: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(field, why)`` for each bad value among ``values`` (unnamed fields at their defaults): the checks of
    ``JobOptions``, for a front end that reports problems its own way (the runtime's ``[greentrain]``)."""
    unknown = sorted(set(values) - set(JobOptions.__dataclass_fields__))
    if unknown:
        raise TypeError(f"not JobOptions fields: {unknown}")
    settings = {f.name: f.default for f in dataclasses.fields(JobOptions)} | dict(values)
    problems = dict(_value_problems(settings))  # field-specific wording first, one line per field
    types = hints(JobOptions)
    for name, value in settings.items():
        why = type_problem(types[name], value) if name not in problems else None
        if why is not None:
            problems[name] = why
    order = list(JobOptions.__dataclass_fields__)
    return sorted(problems.items(), key=lambda item: order.index(item[0]))


def _number(value: object, *, low_ok: bool) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and (
        value >= 0 if low_ok else value > 0)


def _value_problems(o: Mapping[str, object]) -> Iterator[tuple[str, str]]:
    """(field, why) for values of the right type that a field still refuses."""
    precision = o["precision"]
    if precision is not None and (isinstance(precision, str) or not isinstance(precision, list | tuple)
                                  or not all(isinstance(p, str) for p in precision)):
        yield "precision", f"give a list of names such as ['fp32', 'bf16'], got {precision!r}"
    yield from budget_problems(waiting_power_w=o["waiting_power_w"], max_emissions_g=o["max_emissions_g"],
                               max_energy_j=o["max_energy_j"])  # as a policy file's [settings] checks them
    saving, error = o["min_wait_saving"], o["estimate_error"]
    if not (_number(saving, low_ok=True) and saving <= 1):
        yield "min_wait_saving", f"must be a fraction in [0, 1], got {saving!r}"
    if not (_number(error, low_ok=True) and error <= 10):
        yield "estimate_error", f"must be a fraction in [0, 10], got {error!r}"
    if not _number(o["decide_interval_s"], low_ok=False):
        yield "decide_interval_s", f"must be > 0, got {o['decide_interval_s']}"
    if o["step_time_s"] is not None and not _number(o["step_time_s"], low_ok=False):
        yield "step_time_s", f"must be a number of seconds > 0, got {o['step_time_s']!r}"
    steps = o["steps_total"]
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 0):
        yield "steps_total", f"must be >= 0, got {steps}"
    profile = o["scaling_profile"]
    if isinstance(profile, str) and not profile.strip():
        yield "scaling_profile", "must be a CSV path (or unset)"
    profile_steps = o["scaling_profile_steps"]
    if isinstance(profile_steps, int) and not isinstance(profile_steps, bool) and not 1 <= profile_steps <= 10_000:
        yield "scaling_profile_steps", f"must be in [1, 10000], got {profile_steps}"
    fewest, most = o["min_replicas"], o["max_replicas"]
    if isinstance(fewest, int) and fewest < 1:
        yield "min_replicas", f"must be >= 1, got {fewest}"
    elif isinstance(most, int) and isinstance(fewest, int) and most < fewest:
        yield "max_replicas", f"must be >= min_replicas ({fewest}), got {most}"
    port = o["metrics_port"]
    if port is not None and not (isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535):
        yield "metrics_port", f"must be a port number 0..65535, got {port!r}"
    addr = o["metrics_addr"]
    if isinstance(addr, str) and not _is_listen_address(addr):
        yield "metrics_addr", f"{addr!r} is not an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0) or 'localhost'"
    if not isinstance(o["job"], str) or not o["job"].strip():
        yield "job", "must not be empty"
    signals = o["stop_signals"]
    if not isinstance(signals, tuple | list) or not all(isinstance(s, int) for s in signals):
        yield "stop_signals", f"give signal numbers, e.g. (signal.SIGTERM,), got {signals!r}"
    target = o["codecarbon_csv"]
    if isinstance(target, str) and not target.strip():
        yield "codecarbon_csv", "must not be empty; give a file such as emissions.csv"
    why = _deadline_problem(o["deadline"])
    if why:
        yield "deadline", why


def _is_listen_address(addr: str) -> bool:
    """An address a metrics server can bind without a name lookup: an IP literal or 'localhost'."""
    if addr == "localhost":
        return True
    try:
        ipaddress.ip_address(addr)
    except ValueError:
        return False
    return True


def _deadline_problem(value: object) -> str | None:
    """A deadline that can never be resolved (its time against the work is the engine's one check, at start)."""
    if isinstance(value, datetime) and (value.tzinfo is None or value.utcoffset() is None):
        return f"naive datetime {value.isoformat()} — give a timezone, e.g. '...Z' or '+00:00'"
    if isinstance(value, str):
        try:
            parse_deadline(value, datetime(2000, 1, 1, tzinfo=UTC), param="")
        except ConfigError as e:
            return str(e).removeprefix(": ")
    return None


class SessionSettings(TypedDict, total=False):
    """The settings ``Session`` takes as keywords: the ``JobOptions`` fields offered to "session" (but
    ``policy``, its first parameter), each with the field's type. Written out so that a type checker sees it;
    a test holds it to the fields."""

    zone: str | None
    provider: ProviderSpec | None
    deadline: datetime | str | None
    deadline_policy: DeadlinePolicy | None
    steps_total: int | None
    step_time_s: float | None
    decide_interval_s: float
    min_wait_saving: float
    estimate_error: float
    pause_mode: PauseMode | None
    relaunch: Relaunch
    checkpoint_dir: str | Path | None
    state_path: str | Path | None
    waiting_power_w: float | None
    max_emissions_g: float | None
    max_energy_j: float | None
    max_replicas: int | None
    min_replicas: int
    power: PowerSwitch
    precision: Sequence[str] | None
    profile_cache_dir: str | Path | Literal[False] | None
    state_dir: str | Path | None
    actuation: Actuation | None
    job: str
    jsonl: str | Path | None
    codecarbon_csv: str | Path | None
    metrics_port: int | None
    metrics_addr: str
    metrics_allow_public: bool
    progress: bool
    quiet: bool


class JobSettings(SessionSettings, total=False):
    """Every setting as a keyword: what the framework callbacks take besides their ``JobParts`` (a test holds
    it to the ``JobOptions`` fields)."""

    policy: PolicySpec
    stop_signals: tuple[int, ...]
    scaling_profile: str | Path | None
    scaling_profile_steps: int
