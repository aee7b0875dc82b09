"""``greentrain report RUN.jsonl --out DIR``: an HTML report of a run, no Grafana needed."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["report"]


@click.command("report")
@click.argument("log", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory for index.html and the PNG plots (created if missing).")
def report(log: Path, out_dir: Path) -> None:
    """Render LOG (a greentrain JSONL run log) as DIR/index.html with power, carbon, state and emissions plots."""
    from greentrain.report import build_report

    index = build_report(log, out_dir)
    click.echo(str(index))
