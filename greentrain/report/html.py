"""The report page: a summary table, the plots (PNG beside the page) and the policy actions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape

from greentrain.report.model import RunData, counterfactual_run_now
from greentrain.units import format_duration_s, format_energy_j, format_mass_g
from greentrain.userfile import JSONObject

__all__ = ["render_html", "summary_rows", "html_table", "STYLE"]

STYLE = """body{font-family:system-ui,sans-serif;max-width:1040px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left}
th{background:#f4f4f4}img{max-width:100%;display:block;margin:1em 0}.note{color:#666;font-size:.9em}"""


def _fmt_time(t: object) -> str:
    """A parsed time (``RunData``'s own, or an action's ``t``); '-' for none."""
    return t.strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(t, datetime) else "-"


def _float(value: object) -> float:
    """A logged number as float; TypeError for a value that is none, as ``float()`` itself."""
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"float() argument must be a string or a real number, not {type(value).__name__!r}")


_VERDICTS: dict[object, str] = {True: "met", False: "MISSED", None: "not finished"}


def _clock_label(summary: JSONObject) -> str:
    """Which calendar the log's times are on (the engine writes ``clock`` into its summary)."""
    return {"simulated": " (simulated)", "wall": " (wall clock)"}.get(str(summary.get("clock")), "")


def _parse(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def summary_rows(run: RunData) -> list[tuple[str, str]]:
    """(label, value) pairs: the logged summary where present, else totals from the steps."""
    energy_j = _float(run.summary.get("energy_j", sum(s.energy_j for s in run.steps)))
    emissions_g: object = run.summary.get("emissions_g")
    if emissions_g is None:
        emissions_g = sum(run.step_emissions_g(s) or 0.0 for s in run.steps)
    cf = counterfactual_run_now(run)
    clock = _clock_label(run.summary)
    rows = [("Log", str(run.source)), (f"Start{clock}", _fmt_time(run.start)), (f"End{clock}", _fmt_time(run.end))]
    if run.start and run.end:
        # A replayed calendar is not wall time: say which time this is.
        label = {" (simulated)": "Elapsed (simulated calendar)", " (wall clock)": "Wall time"}.get(clock, "Elapsed")
        rows.append((label, format_duration_s((run.end - run.start).total_seconds())))
    unknown = run.summary.get("emissions_unknown")
    emissions = f"unknown ({unknown})" if unknown else format_mass_g(_float(emissions_g))
    rows += [("Steps", str(len(run.steps))), ("Energy", format_energy_j(energy_j)), ("Emissions", emissions)]
    interpolated = sum(1 for s in run.steps if s.source == "interpolated")
    if interpolated:
        rows.append(("Per-step energy", f"interpolated for {interpolated} of {len(run.steps)} steps (shorter than "
                                        "0.2 s, two refreshes of the energy counter); the totals are measured"))
    if cf and not unknown:
        rows.append(("Run-now counterfactual (same steps, no pauses)", format_mass_g(cf[-1][1])))
    if run.summary.get("emissions_avoided_g") is not None:
        rows.append(("Avoided, net (engine, vs run-now at default settings; waiting and resumes count against it)",
                     format_mass_g(_float(run.summary["emissions_avoided_g"]))))
    if run.summary.get("waiting_energy_j"):
        rows.append(("Drawn while paused or waiting (held devices)",
                     format_energy_j(_float(run.summary["waiting_energy_j"]))))
    if run.summary.get("deadline"):
        met = run.summary.get("deadline_met")
        verdict = _VERDICTS.get(met, "not finished")
        rows.append((f"Deadline{clock}", f"{_fmt_time(_parse(run.summary['deadline']))}: {verdict}"))
    if run.zone:
        rows.append(("Grid zone", str(run.zone)))
    # Transitions into 'paused' (a re-plan during a pause logs 'paused' again; that is the same pause).
    pauses = sum(1 for i, (_, state) in enumerate(run.states)
                 if state == "paused" and (i == 0 or run.states[i - 1][1] != "paused"))
    rows.append(("Pauses", str(pauses)))
    actual = [count for _, kind, count in run.replicas if kind == "actual"]
    if actual:
        changes = sum(1 for a, b in zip(actual, actual[1:]) if a != b)
        rows.append(("Replicas (carbon scaling)", f"{changes} changes; ran at {', '.join(map(str, sorted(set(actual))))}"
                                                  f" replicas, last {actual[-1]}"))
    return rows


def _cell(value: object) -> str:
    """A log value for a table cell: nothing for null, lists joined."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def html_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A table of escaped cells."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _change(estimate: object, key: str) -> str:
    value = estimate.get(key) if isinstance(estimate, dict) else None
    return f"{value * 100:+.1f} % (estimated)" if isinstance(value, (int, float)) else "not estimated"


def _advice_html(run: RunData) -> str:
    """Advisory mode's decisions: what would have been set, what is set, the estimated effect."""
    if not run.advice:
        return ""
    rows = [[_fmt_time(a["t"]), _cell(a.get("power_limit_w")), _cell(a.get("current_power_limit_w")),
             _cell(a.get("sm_clocks_mhz")), _cell(a.get("precision")), _change(a.get("estimate"), "energy_change"),
             _change(a.get("estimate"), "time_change")] for a in run.advice]
    return ("<h2>Advisory mode: advised, not applied</h2>"
            "<p class=\"note\">Nothing below was applied to the hardware. Effects are estimated from the job's "
            "operating points: energy per unit of work and running time, against the current setting.</p>"
            + html_table(["time", "power limit advised (W)", "current (W)", "SM clocks (MHz)", "precision",
                      "energy change", "time change"], rows))


def render_html(run: RunData, images: list[str]) -> str:
    """The whole page; every string from the log is HTML-escaped."""
    summary = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in summary_rows(run))
    figures = "\n".join(f'<img src="{escape(name)}" alt="{escape(name.removesuffix(".png"))}">' for name in images)
    actions = [[_fmt_time(a["t"]), _cell(a.get("action")), _cell(a.get("reason")), _cell(a.get("power_limit_w")),
                _cell(a.get("precision")), _cell(a.get("replicas")), _cell(a.get("until")), _cell(a.get("applied"))]
               for a in run.actions]
    actions_html = html_table(["time", "action", "reason", "power limit (W)", "precision", "replicas", "until",
                               "applied"], actions) if actions else "<p>No policy actions.</p>"
    advice_html = _advice_html(run)
    notes_html = ("<h2>Notes</h2>" + html_table(["time", "note"], [[_fmt_time(t), m] for t, m in run.notes])) \
        if run.notes else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>greentrain run report</title><style>{STYLE}</style></head>
<body>
<h1>greentrain run report</h1>
<table>{summary}</table>
<p class="note">Emissions integrate each step's energy x the grid intensity of its interval. The run-now
counterfactual replays the same steps, with the same energy, back to back from the start.</p>
{figures}
<h2>Policy actions</h2>
{actions_html}
{advice_html}
{notes_html}
</body></html>
"""
