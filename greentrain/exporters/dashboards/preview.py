"""Render a dashboard's panels to one PNG from a live Prometheus, without Grafana.

For docs and quick checks: each panel's queries run as Prometheus range
queries (variables substituted) and are drawn with matplotlib where Grafana
would put them on its 24-column grid. Time series become lines, stats a big
number, bar gauges bars of the last value, state timelines coloured spans,
rows their title.

    python -m greentrain.exporters.dashboards.preview http://127.0.0.1:9090 out/ --var job=llm-7b --minutes 30
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click
import httpx
import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from greentrain.errors import ConfigError, GreentrainError  # noqa: E402
from greentrain.exporters.dashboards.panels import Json  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["Series", "prometheus_range", "substitute", "render_preview"]

Series = tuple[dict[str, str], list[tuple[float, float]]]
RangeQuery = Callable[[str], list[Series]]


def prometheus_range(url: str, start_s: float, end_s: float, step_s: float) -> RangeQuery:
    """A function running one PromQL range query against ``url`` (raises ConfigError on a bad answer)."""
    client = httpx.Client(base_url=url.rstrip("/"), timeout=10.0)

    def query(expr: str) -> list[Series]:
        try:
            reply = client.get("/api/v1/query_range", params={"query": expr, "start": start_s, "end": end_s,
                                                              "step": step_s})
            body = reply.json()
        except (httpx.HTTPError, ValueError) as e:
            raise ConfigError(f"prometheus {url}: query failed ({type(e).__name__})") from None
        if body.get("status") != "success":
            raise ConfigError(f"prometheus {url}: {body.get('error', 'query failed')} in {expr!r}")
        return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in body["data"]["result"]]

    return query


def substitute(expr: str, variables: dict[str, str], range_s: float, step_s: float) -> str:
    """Replace Grafana variables; ``$__rate_interval`` becomes 4 steps, ``$__range`` the whole range."""
    values = {"__rate_interval": f"{max(4 * step_s, 1):.0f}s", "__range": f"{range_s:.0f}s",
              "__interval": f"{step_s:.0f}s", **variables}
    return re.sub(r"\$(\w+)", lambda m: values.get(m[1], ".*"), expr)


def _legend(fmt: str, labels: dict[str, str]) -> str:
    if not fmt or fmt == "__auto":
        return ",".join(f"{k}={v}" for k, v in labels.items() if k != "__name__") or "value"
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), fmt)


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _draw(ax: Axes, panel: Json, data: list[tuple[str, list[tuple[float, float]]]]) -> None:
    kind = panel["type"]
    if not data:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
    elif kind == "stat":
        ax.text(0.5, 0.45, f"{data[0][1][-1][1]:,.4g}", ha="center", va="center", fontsize=20,
                transform=ax.transAxes, color="#2ca02c")
    elif kind == "bargauge":
        ax.barh([name for name, _ in data], [points[-1][1] for _, points in data], color="#e377c2")
        ax.tick_params(labelsize=6)
    elif kind == "state-timeline":
        mapping = panel["fieldConfig"]["defaults"]["mappings"][0]["options"]
        for row, (name, points) in enumerate(data):
            for (t0, value), (t1, _) in zip(points, points[1:] + [(points[-1][0] + 1, 0)], strict=True):
                style = mapping.get(f"{value:g}")
                if style:
                    ax.barh(row, (t1 - t0) / 86400, left=mdates.date2num(_dt(t0)), color=style["color"], height=0.8)
        ax.set_yticks(range(len(data)), [name for name, _ in data], fontsize=6)
    else:
        for name, points in data:
            ax.plot(mdates.date2num([_dt(t) for t, _ in points]), [v for _, v in points], lw=1, label=name)
        ax.legend(fontsize=5, loc="upper left")
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=UTC))
    if kind == "state-timeline" and data:
        ax.xaxis_date(tz=UTC)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=UTC))
    if kind == "stat" or not data:
        ax.set_xticks([])
    if kind == "stat" or not data:
        ax.set_yticks([])
    ax.tick_params(labelsize=6)
    ax.set_title(panel["title"], fontsize=8)


def render_preview(board: Json, query: RangeQuery, out_png: Path, *, variables: dict[str, str],
                   range_s: float, step_s: float) -> list[str]:
    """Draw every panel of ``board`` to ``out_png``; returns the titles of panels that had no data."""
    panels = board["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    fig = plt.figure(figsize=(16, rows * 0.42), dpi=90)
    grid = fig.add_gridspec(rows, 24, hspace=1.6, wspace=1.2, top=0.95, bottom=0.03, left=0.06, right=0.98)
    empty = []
    for panel in panels:
        pos = panel["gridPos"]
        ax = fig.add_subplot(grid[pos["y"]:pos["y"] + pos["h"], pos["x"]:pos["x"] + pos["w"]])
        if panel["type"] == "row":  # a heading across the board, no queries of its own
            ax.axis("off")
            ax.text(0.0, 0.5, panel["title"], fontsize=10, fontweight="bold", va="center", transform=ax.transAxes)
            continue
        data = [(_legend(t.get("legendFormat", ""), labels), points)
                for t in panel["targets"] for labels, points in query(substitute(t["expr"], variables, range_s, step_s))
                if points]
        if not data:
            empty.append(panel["title"])
        _draw(ax, panel, data)
    fig.suptitle(board["title"])
    fig.savefig(out_png, format="png", bbox_inches="tight")
    plt.close(fig)
    return empty


@click.command()
@click.argument("prometheus")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Dashboard variable; repeatable.")
@click.option("--minutes", type=click.FloatRange(min=1), default=30.0, show_default=True, help="Time range.")
def main(prometheus: str, out_dir: Path, variables: tuple[str, ...], minutes: float) -> None:
    """Render every greentrain dashboard to OUT_DIR/<name>.png from the Prometheus at PROMETHEUS."""
    from greentrain.exporters.dashboards import DASHBOARDS

    bad = [v for v in variables if "=" not in v]
    if bad:
        raise click.BadParameter(f"{bad[0]!r} is not NAME=VALUE", param_hint="--var")
    values = dict(v.split("=", 1) for v in variables)
    end_s, range_s = time.time(), minutes * 60
    step_s = max(1.0, range_s / 240)
    query = prometheus_range(prometheus, end_s - range_s, end_s, step_s)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for filename, build in DASHBOARDS.items():
            out = out_dir / filename.replace(".json", ".png")
            empty = render_preview(build(), query, out, variables=values, range_s=range_s, step_s=step_s)
            click.echo(f"{out}" + (f" (no data: {', '.join(empty)})" if empty else ""))
    except (GreentrainError, OSError) as e:
        click.echo(f"preview: error: {e}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
