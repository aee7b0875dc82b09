"""HTML run report for people without Grafana: ``greentrain report RUN.jsonl --out DIR``.

Reads the JSONL run log (``greentrain.events``), draws power, carbon
intensity, the job state timeline and cumulative emissions against the
run-now counterfactual with matplotlib, and writes ``DIR/index.html`` with the
PNGs beside it.
"""

from __future__ import annotations

from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.report.html import render_html
from greentrain.report.model import RunData, counterfactual_run_now, load_run

__all__ = ["RunData", "build_report", "counterfactual_run_now", "load_run"]


def build_report(log_path: str | Path, out_dir: str | Path) -> Path:
    """Write the report for ``log_path`` into ``out_dir``; returns the path of ``index.html``."""
    run = load_run(log_path)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        from greentrain.report.plots import draw_all  # matplotlib only when actually drawing

        images = [p.name for p in draw_all(run, out)]
        index = out / "index.html"
        index.write_text(render_html(run, images), encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write the report ({e.strerror})") from None
    return index
