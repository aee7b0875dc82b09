"""The report page: a summary table, the plots (PNG beside the page) and the policy actions."""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any

from greentrain.report.model import J_PER_KWH, RunData, counterfactual_run_now

__all__ = ["render_html", "summary_rows"]

_STYLE = """body{font-family:system-ui,sans-serif;max-width:1040px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left}
th{background:#f4f4f4}img{max-width:100%;display:block;margin:1em 0}.note{color:#666;font-size:.9em}"""


def _fmt_time(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC") if t else "-"


def summary_rows(run: RunData) -> list[tuple[str, str]]:
    """(label, value) pairs: the logged summary where present, else totals from the steps."""
    energy_j = float(run.summary.get("energy_j", sum(s.energy_j for s in run.steps)))
    emissions_g = run.summary.get("emissions_g")
    if emissions_g is None:
        emissions_g = sum(run.step_emissions_g(s) or 0.0 for s in run.steps)
    cf = counterfactual_run_now(run)
    rows = [("Log", str(run.source)), ("Start", _fmt_time(run.start)), ("End", _fmt_time(run.end))]
    if run.start and run.end:
        rows.append(("Wall time", f"{(run.end - run.start).total_seconds() / 3600:.2f} h"))
    rows += [("Steps", str(len(run.steps))), ("Energy", f"{energy_j:,.0f} J ({energy_j / J_PER_KWH:.4f} kWh)"),
             ("Emissions", f"{float(emissions_g):,.2f} gCO2eq")]
    if cf:
        rows.append(("Run-now counterfactual (same steps, no pauses)", f"{cf[-1][1]:,.2f} gCO2eq"))
    if "emissions_avoided_g" in run.summary:
        rows.append(("Avoided, net (engine, vs run-now at default settings; waiting and resumes count against it)",
                     f"{float(run.summary['emissions_avoided_g']):,.2f} gCO2eq"))
    if run.summary.get("waiting_energy_j"):
        rows.append(("Drawn while paused or waiting (held devices)",
                     f"{float(run.summary['waiting_energy_j']):,.0f} J"))
    if run.zone:
        rows.append(("Grid zone", str(run.zone)))
    # Transitions into 'paused' (a re-plan during a pause logs 'paused' again; that is the same pause).
    pauses = sum(1 for i, (_, state) in enumerate(run.states)
                 if state == "paused" and (i == 0 or run.states[i - 1][1] != "paused"))
    rows.append(("Pauses", str(pauses)))
    return rows


def _cell(value: Any) -> str:
    """A log value for a table cell: nothing for null, lists joined."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(run: RunData, images: list[str]) -> str:
    """The whole page; every string from the log is HTML-escaped."""
    summary = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in summary_rows(run))
    figures = "\n".join(f'<img src="{escape(name)}" alt="{escape(name.removesuffix(".png"))}">' for name in images)
    actions = [[_fmt_time(a["t"]), _cell(a.get("action")), _cell(a.get("reason")), _cell(a.get("power_limit_w")),
                _cell(a.get("precision")), _cell(a.get("until")), _cell(a.get("applied"))] for a in run.actions]
    actions_html = _table(["time", "action", "reason", "power limit (W)", "precision", "until", "applied"],
                          actions) if actions else "<p>No policy actions.</p>"
    notes_html = ("<h2>Notes</h2>" + _table(["time", "note"], [[_fmt_time(t), m] for t, m in run.notes])) \
        if run.notes else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>greentrain run report</title><style>{_STYLE}</style></head>
<body>
<h1>greentrain run report</h1>
<table>{summary}</table>
<p class="note">Emissions integrate each step's energy x the grid intensity of its interval. The run-now
counterfactual replays the same steps, with the same energy, back to back from the start.</p>
{figures}
<h2>Policy actions</h2>
{actions_html}
{notes_html}
</body></html>
"""
