"""``greentrain whatif --report DIR``: the runs and totals as an HTML page with two figures.

The page reuses the run report's style and tables (``greentrain.report.html``);
the figures are drawn with matplotlib's Agg backend: each run's actual span
against the schedule greentrain would have run (hours from the run's start),
and each run's emissions under run-now and under the policy.
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.report.html import STYLE, html_table
from greentrain.sim.whatif import PRECISION_NOTE, WhatIfFile, WhatIfRun
from greentrain.units import format_duration_s, format_mass_g
from greentrain.userfile import JSONObject

__all__ = ["write_report", "MAX_PLOTTED_RUNS", "schedule_text"]

MAX_PLOTTED_RUNS = 40
"""Runs drawn in the figures (the tables list every run)."""


def _label(file: WhatIfFile, row: int) -> str:
    return f"{Path(file.path).name}:{row}"


def schedule_text(item: WhatIfRun) -> str:
    """When greentrain would have run, in the run's calendar: '03-01 13:00-15:07' per running stretch."""
    parts = []
    for interval in item.result.policy.schedule:
        start, end = item.local(interval.start), item.local(interval.end)
        if start is None or end is None:
            continue
        same_day = start.date() == end.date()
        parts.append(f"{start:%m-%d %H:%M}-{end:%H:%M}" if same_day else f"{start:%m-%d %H:%M}-{end:%m-%d %H:%M}")
    return ", ".join(parts) or "did not run"


def _hours(item: WhatIfRun, when: datetime | None) -> float:
    return 0.0 if when is None else (when - item.run.started_at).total_seconds() / 3600


def _draw(shown: list[tuple[str, WhatIfRun]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [label for label, _ in shown]
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.35 * len(shown)), dpi=100)
    for y, (_, item) in enumerate(shown):
        ax.barh(y + 0.18, item.run.duration_s / 3600, height=0.3, color="#999999", label="as run" if y == 0 else None)
        for i, interval in enumerate(item.result.policy.schedule):
            begin, end = _hours(item, item.local(interval.start)), _hours(item, item.local(interval.end))
            ax.barh(y - 0.18, end - begin, left=begin, height=0.3, color="#2ca02c",
                    label="greentrain" if y == 0 and i == 0 else None)
        deadline = _hours(item, item.deadline)
        ax.plot([deadline, deadline], [y - 0.4, y + 0.4], color="#d62728", label="deadline" if y == 0 else None)
    ax.set_yticks(range(len(shown)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("hours from the run's start")
    ax.set_title("When each run ran, and when greentrain would have run it")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(out / "schedule.png", format="png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 3.6), dpi=100)
    xs = list(range(len(shown)))
    ax.bar([x - 0.2 for x in xs], [i.result.run_now.emissions_g for _, i in shown], width=0.4, label="run now",
           color="#999999")
    ax.bar([x + 0.2 for x in xs], [i.result.policy.emissions_g for _, i in shown], width=0.4,
           label="greentrain (net of idle draw)", color="#2ca02c")
    ax.set_xticks(xs, labels, rotation=45 if len(shown) > 8 else 0)
    ax.set_ylabel("gCO2eq")
    ax.set_title("Emissions per run on the same carbon signal")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out / "emissions.png", format="png")
    plt.close(fig)
    return ["schedule.png", "emissions.png"]


def _delay(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration_s(seconds)


def _totals(summary: JSONObject) -> list[list[object]]:
    def grams(key: str) -> str:
        value = summary.get(key)
        return format_mass_g(value) if isinstance(value, int | float) else "unknown"

    saving = summary.get("saving_fraction")
    share = f" ({100 * saving:.1f} %)" if isinstance(saving, int | float) else ""
    mean, most = summary.get("mean_delay_s"), summary.get("max_delay_s")
    return [
        ["Runs replayed", summary.get("runs")], ["Policy", summary.get("policy")],
        ["Energy recorded by CodeCarbon", f"{summary.get('energy_kwh')} kWh"],
        ["Run now (as run), on the carbon signal", grams("run_now_emissions_g")],
        ["With greentrain, net of idle draw while held", grams("emissions_g")],
        ["Saving", grams("saving_g") + share], ["Deadlines missed", summary.get("deadlines_missed")],
        ["Mean / longest delay to the finish", f"{_delay(mean if isinstance(mean, int | float) else None)} / "
                                               f"{_delay(most if isinstance(most, int | float) else None)}"],
        ["CodeCarbon's own figure (its annual average)", grams("codecarbon_emissions_g")],
    ]


def _run_row(label: str, item: WhatIfRun) -> list[object]:
    result = item.result
    return [label, f"{item.run.started_at:%Y-%m-%d %H:%M}", format_duration_s(item.run.duration_s), item.zone,
            item.signal, schedule_text(item), ", ".join(f"{w:g} W/GPU" for w in item.power_limits_w) or "-",
            item.profile, format_mass_g(result.run_now.emissions_g), format_mass_g(result.policy.emissions_g),
            format_mass_g(item.saving_g), _delay(item.delay_s), "; ".join(item.notes)]


def write_report(files: list[WhatIfFile], summary: JSONObject, deadline: str, out_dir: str | Path) -> Path:
    """Write ``out_dir/index.html`` and its figures; ``deadline`` says how deadlines were set."""
    out = Path(out_dir)
    labelled = [(_label(f, item.run.row), item) for f in files for item in f.runs]
    skipped: list[list[object]] = [[_label(f, s.row), s.reason] for f in files for s in f.skipped]
    notes: list[list[object]] = [[Path(f.path).name, n] for f in files for n in f.notes]
    try:
        out.mkdir(parents=True, exist_ok=True)
        images = _draw(labelled[:MAX_PLOTTED_RUNS], out) if labelled else []
        figures = "\n".join(f'<img src="{escape(name)}" alt="{escape(name)}">' for name in images)
        page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>greentrain what-if report</title><style>{STYLE}</style></head>
<body>
<h1>What greentrain would have done with these CodeCarbon runs</h1>
{html_table(["", ""], _totals(summary))}
<p class="note">Each run is replayed as a job of its recorded duration and mean draw, deadline {escape(deadline)},
through the same policy and simulator as greentrain simulate. Emissions are on the carbon signal named per run;
waiting while held draws idle power, which counts against the saving. Precision: {escape(PRECISION_NOTE)}.</p>
{figures}
<h2>Runs</h2>
{html_table(["run", "started (UTC)", "duration", "zone", "carbon signal", "greentrain runs (UTC)", "power limit",
             "profile", "run now", "greentrain", "saving", "delay", "notes"],
            [_run_row(label, item) for label, item in labelled])}
{"<h2>Skipped rows</h2>" + html_table(["row", "reason"], skipped) if skipped else ""}
{"<h2>Notes</h2>" + html_table(["file", "note"], notes) if notes else ""}
</body></html>
"""
        index = out / "index.html"
        index.write_text(page, encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--report {out}: cannot write the report ({e.strerror})") from None
    return index
