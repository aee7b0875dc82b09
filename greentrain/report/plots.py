"""The report's figures, drawn with matplotlib's Agg backend (no display needed) to PNG files."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from greentrain.report.model import RunData, counterfactual_run_now

__all__ = ["PLOTS", "draw_all"]

STATE_COLORS = {"running": "#2ca02c", "paused": "#ff7f0e", "waiting": "#1f77b4"}


# matplotlib converts datetimes itself (its units registry: a date axis with date ticks), but its type hints
# name only numbers (matplotlib issues 25676, 27140); these two say so once instead of at every call.
def _times(ts: Sequence[datetime]) -> Sequence[float]:
    return ts  # type: ignore[return-value]  # matplotlib hints omit datetime, see above


def _time(t: datetime) -> float:
    return t  # type: ignore[return-value]  # matplotlib hints omit datetime, see above


def _figure(title: str, ylabel: str) -> tuple[Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(10, 3.6), dpi=100)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz="UTC"))
    return fig, ax


def _empty(ax: plt.Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in this log", ha="center", va="center", transform=ax.transAxes, color="grey")


def power(run: RunData) -> Figure:
    fig, ax = _figure("Power", "W")
    for device, points in sorted(run.power_w.items()):
        ax.plot(_times([t for t, _ in points]), [w for _, w in points], label=device, lw=1)
    if not run.power_w and run.steps:  # no device samples: the mean power of each step
        ax.plot(_times([s.t for s in run.steps]), [s.energy_j / s.duration_s if s.duration_s else 0.0 for s in run.steps],
                label="per-step mean", lw=1)
    if run.power_w or run.steps:
        ax.legend(loc="upper right", fontsize="small")
    else:
        _empty(ax, "power samples")
    return fig


def intensity(run: RunData) -> Figure:
    fig, ax = _figure(f"Grid carbon intensity{f' ({run.zone})' if run.zone else ''}", "gCO2eq/kWh")
    if run.intensity:
        ax.step(_times([t for t, _, _ in run.intensity]), [v for _, v, _ in run.intensity], where="post", label="actual")
    if run.forecast:
        ax.step(_times([t for t, _ in run.forecast]), [v for _, v in run.forecast], where="post", ls="--",
                label="forecast at start")
    _shade_pauses(ax, run)
    if run.intensity or run.forecast:
        ax.legend(loc="upper right", fontsize="small")
    else:
        _empty(ax, "carbon intensity")
    return fig


def _state_spans(run: RunData) -> list[tuple[datetime, datetime, str]]:
    spans = []
    for i, (t, state) in enumerate(run.states):
        end = run.states[i + 1][0] if i + 1 < len(run.states) else run.end
        if end is not None and end > t:
            spans.append((t, end, state))
    return spans


def _shade_pauses(ax: plt.Axes, run: RunData) -> None:
    for start, end, state in _state_spans(run):
        if state != "running":
            ax.axvspan(_time(start), _time(end), color=STATE_COLORS.get(state, "grey"), alpha=0.12, lw=0)


def states(run: RunData) -> Figure:
    fig, ax = _figure("Job state and policy actions", "")
    ax.set_yticks([])
    seen = set()
    for start, end, state in _state_spans(run):
        label = state if state not in seen else None
        seen.add(state)
        ax.axvspan(_time(start), _time(end), ymin=0.35, ymax=0.65, color=STATE_COLORS.get(state, "grey"), label=label)
    for action in run.actions:
        t = action["t"]
        if isinstance(t, datetime):  # always: the run model parses every action's time
            ax.axvline(_time(t), color="black", lw=0.8, alpha=0.6)
    if seen:
        ax.legend(loc="upper right", fontsize="small", ncols=3)
    if not seen and not run.actions:
        _empty(ax, "state changes")
    return fig


def emissions(run: RunData) -> Figure:
    fig, ax = _figure("Cumulative emissions vs the run-now counterfactual", "gCO2eq")
    total = 0.0
    # From zero at the start (a RunData from load_run always has one).
    xs: list[datetime] = [run.start] if run.start is not None else []
    ys = [0.0] if run.start is not None else []
    for step in run.steps:  # flat while not stepping (paused), rising during each step
        xs.append(step.t - timedelta(seconds=step.duration_s))
        ys.append(total)
        total += run.step_emissions_g(step) or 0.0
        xs.append(step.t)
        ys.append(total)
    cf = counterfactual_run_now(run)
    if run.steps:
        ax.plot(_times(xs), ys, label="this run", lw=1.5)
    if cf:
        ax.plot(_times([t for t, _ in cf]), [g for _, g in cf], ls="--", label="run now, no pauses", lw=1.5)
    if run.steps:
        ax.legend(loc="upper left", fontsize="small")
    else:
        _empty(ax, "steps")
    return fig


def replicas(run: RunData) -> Figure | None:
    """Carbon scaling: the replica count planned per interval and the count running (None: a fixed-size job)."""
    if not run.replicas:
        return None
    fig, ax = _figure("Replicas (carbon scaling)", "replicas")
    for kind, style in (("planned", "--"), ("actual", "-")):
        points = [(t, count) for t, k, count in run.replicas if k == kind]
        if points and run.end is not None:
            points.append((run.end, points[-1][1]))
            ax.step(_times([t for t, _ in points]), [c for _, c in points], where="post", ls=style, label=kind)
    ax.set_ylim(bottom=0)
    locator = ax.yaxis.get_major_locator()
    if isinstance(locator, MaxNLocator):  # the default AutoLocator is one
        locator.set_params(integer=True)
    _shade_pauses(ax, run)
    ax.legend(loc="upper right", fontsize="small")
    return fig


PLOTS = {"power.png": power, "intensity.png": intensity, "state.png": states, "replicas.png": replicas,
         "emissions.png": emissions}
"""File name -> figure builder, in the order the report shows them (a builder may have nothing to draw)."""


def draw_all(run: RunData, out_dir: Path) -> list[Path]:
    """Render every plot to ``out_dir``; returns the PNG paths."""
    paths = []
    for filename, build in PLOTS.items():
        fig = build(run)
        if fig is None:
            continue
        if run.start and run.end and run.end > run.start:  # one time axis for every plot
            for ax in fig.axes:
                ax.set_xlim(_time(run.start), _time(run.end))
        fig.autofmt_xdate()
        fig.tight_layout()
        path = out_dir / filename
        fig.savefig(path, format="png")
        plt.close(fig)
        paths.append(path)
    return paths
