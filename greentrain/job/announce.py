"""What a job says about itself: one plan line at the start and one summary line at the end.

Every front end (``Session``, the HF, Lightning and Accelerate callbacks,
``greentrain run``, ``greentrain train``, ``greentrain demo``) builds its job
with ``build_job``, and the ``Job`` says these two lines through this module,
so they read alike everywhere:

    greentrain: plan: policy carbon-aware, carbon GB from a replayed trace (GB_2022_hourly.csv), deadline ...
    greentrain: done: 1,806 steps, energy 609 J (0.169 Wh) (cpu-estimate: estimated), emissions 24.5 mgCO2eq, ...

The lines go to the ``greentrain.report`` logger at INFO. Where the program
has set up no logging at all (no handler on the way to the root logger), they
are written to stderr instead, so a plain script sees them too. The job
setting ``quiet`` (``Session(quiet=True)``, ``--quiet``) turns both off.
Only rank 0 speaks.
"""

from __future__ import annotations

import logging
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from greentrain.engine.collaborators import ReportsReadings
from greentrain.signals.base import CarbonIntensityProvider
from greentrain.signals.cache import CachedProvider
from greentrain.signals.chain import SignalChain
from greentrain.signals.providers.csvtrace import CSVTraceProvider
from greentrain.units import format_duration_s, format_energy_j, format_masses_g, format_time

if TYPE_CHECKING:
    from greentrain.engine.carbonview import CarbonView
    from greentrain.engine.collaborators import CarbonSignal, EnergyMonitor
    from greentrain.engine.core import EngineCore

__all__ = ["say", "signal_words", "plan_text", "summary_text", "outcome_words", "energy_sources", "LOGGER_NAME"]

LOGGER_NAME = "greentrain.report"
log = logging.getLogger(LOGGER_NAME)


def say(line: str) -> None:
    """``line`` at INFO on ``greentrain.report``; on stderr when the program configured no logging."""
    if log.hasHandlers():
        log.info(line)
    elif _wanted():
        print(line, file=sys.stderr, flush=True)


def _wanted() -> bool:
    """Not silenced by a level set on ``greentrain.report`` or ``greentrain`` (the root's own level, WARNING by
    default, is not asked: with no logging set up the lines are still wanted)."""
    logger: logging.Logger | None = log
    while logger is not None and logger is not logging.getLogger():
        if logger.level != logging.NOTSET:
            return logger.level <= logging.INFO
        logger = logger.parent
    return True


def _providers(signals: CarbonSignal) -> list[object]:
    return list(signals.providers) if isinstance(signals, SignalChain) else [signals]


def _inner(provider: object) -> object:
    return provider.inner if isinstance(provider, CachedProvider) else provider  # reports what it wraps


def _path(provider: object) -> Path | None:
    inner = _inner(provider)
    return inner.path if isinstance(inner, CSVTraceProvider) else None


def _one(provider: object) -> str:
    name, path = _name(provider), _path(provider)
    if name == "csv" or path is not None:
        return f"a replayed trace ({path.name})" if path is not None else "a replayed trace"
    if name == "static":
        return "static annual averages (CodeCarbon)"
    return f"{name} (live)"


def _name(provider: object) -> str:
    inner = _inner(provider)
    return str(inner.name) if isinstance(inner, CarbonIntensityProvider) else type(inner).__name__


def _offline(provider: object) -> bool:
    return _name(provider) in ("csv", "static") or _path(provider) is not None


def _not_reached(view: CarbonView | None, providers: list[object]) -> str | None:
    """Why the first (live) provider gave no value at the start, or None when it did (or cannot be known)."""
    if view is None or _offline(providers[0]):
        return None
    point = view.last
    if point is not None and not view.stale and point.provider == _name(providers[0]):
        return None
    status = view.status()
    error = (status.last_error if status is not None else None) or view.failure  # the chain's is the shorter
    if error:
        return f"not reached: {error.removeprefix(_name(providers[0]) + ': ')}"
    if point is None or view.stale:
        return "no answer yet"
    return "not reached"


def signal_words(signals: CarbonSignal | None, zone: str | None, provider_spec: object = None,
                 view: CarbonView | None = None) -> str:
    """How the job prices its energy: live, replayed, static, or a fallback, and why a fallback.

    ``view`` (the engine's, after its first read): a live provider is called live only when it answered;
    otherwise the words say why not and what is used instead (the fallback that answered, or nothing)."""
    if signals is None:
        return "no carbon signal (energy only; runs now)"
    where = str((signals.zone if isinstance(signals, SignalChain) else "") or zone or "")
    providers = _providers(signals)
    why = _not_reached(view, providers)
    if why is not None:
        first = f"{_name(providers[0])} ({why})"
        point = view.last if view is not None else None
        used = next((p for p in providers[1:] if point is not None and _name(p) == point.provider), None)
        if used is not None:
            fallback = f"; using the fallback {_one(used)}"
        elif point is not None:
            fallback = f"; using its last value ({point.provider})"
        else:
            fallback = "; no carbon value until it answers (runs now, emissions unknown)"
        return (f"carbon {where} from {first}" if where else f"carbon from {first}") + fallback
    words = f"carbon {where} from {_one(providers[0])}" if where else f"carbon from {_one(providers[0])}"
    if len(providers) > 1:
        words += ", falling back to " + ", then ".join(_one(p) for p in providers[1:])
    elif provider_spec is None and _name(providers[0]) == "static":
        words += " (a fallback: no live provider is configured; set $ELECTRICITYMAPS_TOKEN or give --provider)"
    return words


def plan_text(engine: EngineCore, *, policy: str, zone: str | None, provider_spec: object,
              metrics_url: str | None, pause_mode: str | None = None) -> str:
    """The plan: policy, carbon signal and its kind, work, deadline, how it pauses, metrics URL."""
    parts = [f"policy {policy}", signal_words(engine.signals.signals, zone, provider_spec, view=engine.signals)]
    work_s = engine.progress.work_total_s
    if work_s:
        parts.append(f"~{format_duration_s(work_s)} of work")
    simulated = engine.clock.simulated
    deadline = engine.deadline.at
    parts.append(f"deadline {format_time(deadline, simulated=simulated)}" if deadline else "no deadline")
    if pause_mode:
        parts.append(f"pauses by {pause_mode}")
    if metrics_url:
        parts.append(f"metrics at {metrics_url}")
    return "greentrain: plan: " + ", ".join(parts)


def energy_sources(monitor: EnergyMonitor | None) -> dict[str, str]:
    """Device name -> where its energy figure came from (measured, integrated, interpolated, estimated)."""
    if not isinstance(monitor, ReportsReadings):
        return {}
    try:
        found = monitor.readings()
    except Exception:  # noqa: BLE001 - a summary must never fail a job
        return {}
    return {str(r.name): str(r.source) for r in found if not r.failed}


def _labels(sources: dict[str, str]) -> str:
    return ", ".join(f"{device}: {source}" for device, source in sorted(sources.items()))


def outcome_words(exit_status: int) -> str:
    """How a command ended, from its status: '' (0), a saved checkpoint (75), a signal (128 + N), a failure."""
    from greentrain.exitcodes import RESUME_EXIT_CODE

    if exit_status == 0:
        return ""
    if exit_status == RESUME_EXIT_CODE:
        return f"checkpoint saved, to resume later (exit {exit_status})"
    if exit_status > 128:
        try:
            return f"stopped by {signal.Signals(exit_status - 128).name} (exit {exit_status})"
        except ValueError:
            pass
    return f"failed (exit {exit_status})"


def summary_text(engine: EngineCore, *, sources: dict[str, str], finished: bool | None,
                 exit_status: int | None = None, paused_until: datetime | None = None,
                 lost_energy_j: float | None = None) -> str:
    """The summary: steps, energy with its source labels, emissions and net avoided (one unit), deadline.

    A command that did not exit 0 gets how it ended instead of a verdict: no avoided grams, no 'met'.
    ``lost_energy_j``: energy of work that was not saved (counted, never called progress)."""
    from greentrain.engine.jobsummary import job_figures

    figures = job_figures(engine)
    ended = outcome_words(exit_status) if exit_status else ""
    parts = [] if exit_status is None else [ended or f"exit status {exit_status}"]
    steps, total = engine.progress.steps_done, engine.progress.steps_total
    if total:  # ``greentrain run`` counts polls, not steps: no step count without a known total
        parts.append(f"{steps:,}/{total:,} steps")
    if figures.energy_j is None:
        parts.append("energy not measured")
    else:
        labels = _labels(sources)
        parts.append(f"energy {format_energy_j(figures.energy_j)}" + (f" ({labels})" if labels else ""))
        if lost_energy_j is not None:
            parts.append(f"of which {format_energy_j(lost_energy_j)} lost (work not saved)")
    if figures.emissions_g is None:
        why = engine.signals.unknown_reason() if engine.measures_energy else "no energy measured"
        parts.append(f"emissions unknown ({why})" if why else "emissions unknown")
    elif ended or lost_energy_j is not None:  # nothing was avoided by work that failed or was lost
        parts.append(f"emissions {format_masses_g([figures.emissions_g])[0]}")
    else:
        emitted, avoided = format_masses_g([figures.emissions_g, figures.avoided_g])
        parts += [f"emissions {emitted}", f"net avoided {avoided} (vs run-now, waiting's draw included)"]
    met = figures.deadline_met if not ended else None
    parts.append(_deadline_words(figures.deadline, figures.finished_at if not ended else None, met,
                                 figures.simulated, finished=finished and not ended, paused_until=paused_until))
    return "greentrain: done: " + ", ".join(p for p in parts if p)


def _deadline_words(deadline: datetime | None, finished_at: datetime | None, met: bool | None, simulated: bool, *,
                    finished: bool | None, paused_until: datetime | None) -> str:
    if paused_until is not None:
        state = f"paused until {format_time(paused_until, simulated=simulated)}"
    elif finished is False:
        state = "not finished"
    else:
        state = ""
    if deadline is None:
        return state or "no deadline"
    when = format_time(deadline, simulated=simulated)
    if met is True:
        return f"deadline {when} met"
    if met is False and finished_at is not None:
        late_s = (finished_at - deadline).total_seconds()
        return f"deadline {when} MISSED by {format_duration_s(late_s)}"
    return f"{state or 'not finished'}, deadline {when}"

